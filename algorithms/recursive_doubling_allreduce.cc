// Recursive doubling allreduce as a Plan. The buffer is cut into segments so
// that round k+1 of one segment starts as soon as round k of that segment is
// reduced, and so received data waits in a few bounded scratch slots.
#include "algorithms/recursive_doubling_allreduce.h"

#include <algorithm>

#include "algorithms/power_of_two_fold.h"
#include "algorithms/recursive_phases.h"
#include "algorithms/reduction_segments.h"

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
  Plan plan;
  if (call.count == 0) return plan;
  const size_t element_bytes = element_size(call.type);
  const size_t segment_bytes = segment_bytes_for(tuning.segment_bytes, element_bytes);
  const BufferKind own = call.in_place ? BufferKind::output : BufferKind::input;

  std::vector<Segment> pieces;
  add_segments(pieces, 0, Region{own, 0, call.bytes()}, Region{BufferKind::output, 0, call.bytes()}, segment_bytes);
  append_folded_allreduce(plan, call, tuning, std::move(pieces), 1, exchange_all);
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions recursive_doubling_allreduce{recursive_doubling_allreduce_supports,
                                                          recursive_doubling_allreduce_cost,
                                                          recursive_doubling_allreduce_plan};

}  // namespace chorus::algorithms
