// The table of flat Plans (flat_plans.h).
#include "algorithms/plans/flat_plans.h"

#include "algorithms/plans/allgather/bruck_allgather.h"
#include "algorithms/plans/allgather/recursive_doubling_allgather.h"
#include "algorithms/plans/allgather/ring_allgather.h"
#include "algorithms/plans/allreduce/halving_doubling_allreduce.h"
#include "algorithms/plans/allreduce/recursive_doubling_allreduce.h"
#include "algorithms/plans/allreduce/ring_allreduce.h"
#include "algorithms/plans/alltoall/bruck_alltoall.h"
#include "algorithms/plans/alltoall/pairwise_alltoall.h"
#include "algorithms/plans/barrier/dissemination_barrier.h"
#include "algorithms/plans/broadcast/binomial_broadcast.h"
#include "algorithms/plans/broadcast/chain_broadcast.h"
#include "algorithms/plans/broadcast/scatter_allgather_broadcast.h"
#include "algorithms/plans/gather_scatter/binomial_gather_scatter.h"
#include "algorithms/plans/gather_scatter/linear_gather_scatter.h"
#include "algorithms/plans/reduce/binomial_reduce.h"
#include "algorithms/plans/reduce/reduce_scatter_gather_reduce.h"
#include "algorithms/plans/reduce_scatter/recursive_halving_reduce_scatter.h"
#include "algorithms/plans/reduce_scatter/ring_reduce_scatter.h"

namespace chorus::algorithms {
namespace {

// In each collective's order of preference where costs tie.
constexpr Algorithm flat_plan_table[] = {
    {Collective::allreduce, "ring", &ring_allreduce},
    {Collective::allreduce, "recursive_doubling", &recursive_doubling_allreduce},
    {Collective::allreduce, "halving_doubling", &halving_doubling_allreduce},
    {Collective::reduce_scatter, "ring", &ring_reduce_scatter},
    {Collective::reduce_scatter, "recursive_halving", &recursive_halving_reduce_scatter},
    {Collective::reduce, "binomial", &binomial_reduce},
    {Collective::reduce, "reduce_scatter_gather", &reduce_scatter_gather_reduce},
    {Collective::broadcast, "binomial", &binomial_broadcast},
    {Collective::barrier, "dissemination", &dissemination_barrier},
    {Collective::broadcast, "scatter_allgather", &scatter_allgather_broadcast},
    {Collective::broadcast, "chain", &chain_broadcast},
    {Collective::allgather, "ring", &ring_allgather},
    {Collective::allgather, "recursive_doubling", &recursive_doubling_allgather},
    {Collective::allgather, "bruck", &bruck_allgather},
    {Collective::gather, "linear", &linear_gather},
    {Collective::gather, "binomial", &binomial_gather},
    {Collective::scatter, "linear", &linear_scatter},
    {Collective::scatter, "binomial", &binomial_scatter},
    {Collective::alltoall, "pairwise", &pairwise_alltoall},
    {Collective::alltoall, "bruck", &bruck_alltoall},
};

}  // namespace

std::span<const Algorithm> flat_plans() { return flat_plan_table; }

const Algorithm* find_flat_plan(Collective collective, std::string_view name) {
  for (const Algorithm& algorithm : flat_plan_table)
    if (algorithm.collective == collective && algorithm.name == name) return &algorithm;
  return nullptr;
}

const Algorithm* cheapest_flat_plan(const Call& call, const CostModel& model) {
  const Algorithm* best = nullptr;
  double best_seconds = 0;
  for (const Algorithm& algorithm : flat_plan_table) {
    if (algorithm.collective != call.collective || !algorithm.supports(call)) continue;
    const double seconds = algorithm.cost_seconds(call, model);
    if (!best || seconds < best_seconds) {
      best = &algorithm;
      best_seconds = seconds;
    }
  }
  return best;
}

}  // namespace chorus::algorithms
