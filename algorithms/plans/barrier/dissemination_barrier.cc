// Dissemination barrier as a Plan.
#include "algorithms/plans/barrier/dissemination_barrier.h"

namespace chorus::algorithms {

namespace {

bool dissemination_barrier_supports(const Call& call) { return call.collective == Collective::barrier; }

double dissemination_barrier_cost(const Call& call, const CostModel& model) {
  return ceil_log2(call.size) * model.alpha_seconds;
}

Plan dissemination_barrier_plan(const Call& call, const PlanTuning&) {
  Plan plan;
  const int size = call.size;
  const Region nothing{BufferKind::output, 0, 0};
  StepId heard_previous_round = no_step, told_previous_round = no_step;
  for (int round = 0; (1LL << round) < size; ++round) {
    const int distance = static_cast<int>(1LL << round);
    const int to = static_cast<int>((static_cast<long long>(call.rank) + distance) % size);
    const int from = static_cast<int>(((static_cast<long long>(call.rank) - distance) % size + size) % size);
    // The message of round k says "I and the 2^k - 1 ranks before me
    // arrived", so it may only leave once every earlier round was heard: the
    // previous round's recv directly, the older ones through the chain of sends.
    told_previous_round =
        plan.send(nothing, to, static_cast<uint32_t>(round), {heard_previous_round, told_previous_round});
    heard_previous_round = plan.recv(from, static_cast<uint32_t>(round), nothing);
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions dissemination_barrier{dissemination_barrier_supports, dissemination_barrier_cost,
                                                   dissemination_barrier_plan};

}  // namespace chorus::algorithms
