// The one selection (candidate.h): for a call on a Communicator, the
// candidate a name given by the caller forces, else the one CHORUS_ALGO
// names for that collective, else the cheapest candidate that serves it.
// And, for the Plans alone (the phases of a hierarchical Plan, the
// projection tool): the cheapest Plan under a cost model.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <memory>

#include "algorithms/model/call.h"
#include "algorithms/execution/candidate.h"
#include "algorithms/model/cost_model.h"
#include "algorithms/selection/registry.h"

namespace chorus::algorithms {

// Parses "allreduce:ring,broadcast:board" (spaces around items allowed).
// Throws InvalidArgument for bad syntax, an unknown collective, a collective
// named twice or a name that no candidate of its collective has.
std::map<Collective, std::string> parse_algorithm_overrides(std::string_view text);

class Communicator;

// The candidate for the call: `requested` is "auto" or a name; "auto" takes
// the Communicator's CHORUS_ALGO entry for the collective if it has one.
// A name no candidate serving the call has is looked for inside the
// wrappers that serve it (candidate.h). Throws InvalidArgument naming the
// valid candidates when the name is unknown or cannot serve the call, or
// when nothing serves it. The choice's Plan, if any, is built.
std::shared_ptr<const Choice> choose(const Communicator& communicator, const Call& call, std::string_view requested);

// Plans only. `requested` is "auto" or a name. `overrides` applies only to "auto"; pass
// the result of parse_algorithm_overrides. Throws InvalidArgument naming the
// valid algorithms when the name is unknown or cannot serve the call.
const Algorithm& select_algorithm(const Call& call, std::string_view requested, const CostModel& model,
                                  const std::map<Collective, std::string>& overrides);

}  // namespace chorus::algorithms
