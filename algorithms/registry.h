// Every algorithm the library knows, by collective and name. Adding an
// algorithm means one entry here; selection, CHORUS_ALGO and the tests find
// it through this table.
//
// These are Plans, which chorus's executor runs and the cost model prices.
// Libraries that run a whole call themselves on their own memory kind
// (NCCL) are backends, one layer up (backends/registry.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"
#include "base/deadline.h"

namespace chorus::algorithms {

class Communicator;

struct Algorithm {
  Collective collective;
  std::string_view name;
  bool (*supports)(const Call& call);
  double (*cost_seconds)(const Call& call, const CostModel& model);
  Plan (*build)(const Call& call, const PlanTuning& tuning);
  // The tuning `build` gets for a real call, derived from the same model the
  // cost used, so selection predicts the Plan that runs. Null: PlanTuning{}.
  PlanTuning (*tune)(const Call& call, const CostModel& model) = nullptr;
};

// algorithm.tune(call, model), or the default tuning when it has none.
PlanTuning plan_tuning(const Algorithm& algorithm, const Call& call, const CostModel& model);

std::span<const Algorithm> all_algorithms();
// Null when no algorithm of that name exists for the collective.
const Algorithm* find_algorithm(Collective collective, std::string_view name);
// "ring, ..." : the names valid for a collective, for error messages.
std::string algorithm_names(Collective collective);

}  // namespace chorus::algorithms
