// Every algorithm the library knows, by collective and name. Adding an
// algorithm means defining its functions (algorithm_functions.h) and one
// entry here; selection, CHORUS_ALGO and the tests find it through this table.
//
// These are Plans, which chorus's executor runs and the cost model prices.
// Libraries that run a whole call themselves on their own memory kind
// (NCCL) are backends, one layer up (backends/registry.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "algorithms/algorithm_functions.h"
#include "base/deadline.h"

namespace chorus::algorithms {

class Communicator;

struct Algorithm {
  Collective collective;
  std::string_view name;
  const AlgorithmFunctions* functions;  // defined in the algorithm's own file

  bool supports(const Call& call) const { return functions->supports(call); }
  double cost_seconds(const Call& call, const CostModel& model) const { return functions->cost_seconds(call, model); }
  Plan build(const Call& call, const PlanTuning& tuning) const { return functions->build(call, tuning); }
  // Whether its tuning follows the cost model (plan_tuning); else PlanTuning{}.
  bool tuned_by_model() const { return functions->tune != nullptr; }
};

// The tuning the algorithm derives from the model, or the default tuning when it has none.
PlanTuning plan_tuning(const Algorithm& algorithm, const Call& call, const CostModel& model);

std::span<const Algorithm> all_algorithms();
// Null when no algorithm of that name exists for the collective.
const Algorithm* find_algorithm(Collective collective, std::string_view name);
// "ring, ..." : the names valid for a collective, for error messages.
std::string algorithm_names(Collective collective);

}  // namespace chorus::algorithms
