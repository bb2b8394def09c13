// Halving-doubling allreduce as a Plan.
//
// The buffer is cut into P' groups and every group into segments. Halving
// round k gives away half of the groups still held (2^-k of the buffer) and
// reduces the other half; doubling round k sends back what is held and takes
// the partner's reduced groups straight into the output. Segments let the
// next round of one segment start while later segments of this round are
// still on the wire; received data waits in a few bounded scratch slots.
#include "algorithms/plans/allreduce/halving_doubling_allreduce.h"

#include "algorithms/model/power_of_two_fold.h"
#include "algorithms/model/recursive_phases.h"
#include "algorithms/model/reduction_segments.h"

namespace chorus::algorithms {

namespace {

void halve_then_double(SegmentedReduction& segments, const PowerOfTwoFold& fold) {
  reduce_scatter_by_halving(segments, fold);
  allgather_by_doubling(segments, fold);
}

bool halving_doubling_allreduce_supports(const Call& call) { return call.collective == Collective::allreduce; }

double halving_doubling_allreduce_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const PowerOfTwoFold fold(0, call.size);
  const double bytes = static_cast<double>(call.bytes());
  const double power = fold.power();
  const int rounds = log2_of_power(fold.power());
  // Reductions overlap the wire as in the ring: a halving round's data
  // arrives in pieces (a group, at most a segment), and each is reduced
  // while the next one arrives, so a round exposes one piece's reduction,
  // not its (power - 1) / power share of the buffer.
  const double piece = std::min(bytes / power, static_cast<double>(PlanTuning{}.segment_bytes));
  double exposed_reduction = 0;
  for (int round = 0; round < rounds; ++round)
    exposed_reduction += std::min(bytes / static_cast<double>(size_t{2} << round), piece);
  const double cost = 2 * rounds * model.alpha_seconds + 2 * (power - 1) / power * bytes * model.beta_seconds_per_byte +
                      exposed_reduction * model.gamma_seconds_per_byte;
  return cost + allreduce_fold_cost(fold, bytes, model);
}

Plan halving_doubling_allreduce_plan(const Call& call, const PlanTuning& tuning) {
  return folded_allreduce_plan(call, tuning, PowerOfTwoFold(call.rank, call.size).power(), halve_then_double);
}

}  // namespace

constexpr AlgorithmFunctions halving_doubling_allreduce{halving_doubling_allreduce_supports,
                                                        halving_doubling_allreduce_cost,
                                                        halving_doubling_allreduce_plan};

}  // namespace chorus::algorithms
