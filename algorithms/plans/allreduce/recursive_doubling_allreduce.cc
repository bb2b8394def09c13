// Recursive doubling allreduce as a Plan. The buffer is cut into segments so
// that round k+1 of one segment starts as soon as round k of that segment is
// reduced, and so received data waits in a few bounded scratch slots.
#include "algorithms/plans/allreduce/recursive_doubling_allreduce.h"

#include "algorithms/model/power_of_two_fold.h"
#include "algorithms/model/recursive_phases.h"
#include "algorithms/model/reduction_segments.h"

namespace chorus::algorithms {

namespace {

bool recursive_doubling_allreduce_supports(const Call& call) { return call.collective == Collective::allreduce; }

double recursive_doubling_allreduce_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const PowerOfTwoFold fold(0, call.size);
  const double bytes = static_cast<double>(call.bytes());
  const double round = model.alpha_seconds + bytes * (model.beta_seconds_per_byte + model.gamma_seconds_per_byte);
  const double cost = log2_of_power(fold.power()) * round;
  return cost + allreduce_fold_cost(fold, bytes, model);
}

Plan recursive_doubling_allreduce_plan(const Call& call, const PlanTuning& tuning) {
  return folded_allreduce_plan(call, tuning, 1, exchange_all);
}

}  // namespace

constexpr AlgorithmFunctions recursive_doubling_allreduce{recursive_doubling_allreduce_supports,
                                                          recursive_doubling_allreduce_cost,
                                                          recursive_doubling_allreduce_plan};

}  // namespace chorus::algorithms
