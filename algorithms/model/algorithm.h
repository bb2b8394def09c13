// An algorithm: a Plan builder under a collective and a name, with its
// functions (algorithm_functions.h). The flat Plans' table
// (plans/flat_plans.h) and the whole table (selection/registry.h) list them.
#pragma once

#include <string_view>

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

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
inline PlanTuning plan_tuning(const Algorithm& algorithm, const Call& call, const CostModel& model) {
  return algorithm.tuned_by_model() ? algorithm.functions->tune(call, model) : PlanTuning{};
}

}  // namespace chorus::algorithms
