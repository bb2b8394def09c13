// Choosing the algorithm for a call: an explicit name, else the CHORUS_ALGO
// override for that collective, else the cheapest supporting algorithm under
// the Context's cost model.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/registry.h"

namespace chorus::algorithms {

// Parses "allreduce:ring,broadcast:binomial" (spaces around items allowed).
// Throws InvalidArgument for bad syntax, an unknown collective, a collective
// named twice or an algorithm that does not exist for its collective.
std::map<Collective, std::string> parse_algorithm_overrides(std::string_view text);

// `requested` is "auto" or a name. `overrides` applies only to "auto"; pass
// the result of parse_algorithm_overrides. Throws InvalidArgument naming the
// valid algorithms when the name is unknown or cannot serve the call.
const Algorithm& select_algorithm(const Call& call, std::string_view requested, const CostModel& model,
                                  const std::map<Collective, std::string>& overrides);

}  // namespace chorus::algorithms
