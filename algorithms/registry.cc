// The table of algorithms.
#include "algorithms/registry.h"

#include "algorithms/binomial_broadcast.h"
#include "algorithms/binomial_gather_scatter.h"
#include "algorithms/bruck_allgather.h"
#include "algorithms/bruck_alltoall.h"
#include "algorithms/chain_broadcast.h"
#include "algorithms/linear_gather_scatter.h"
#include "algorithms/pairwise_alltoall.h"
#include "algorithms/recursive_doubling_allgather.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/scatter_allgather_broadcast.h"
#include "algorithms/dissemination_barrier.h"
#include "algorithms/ring_allreduce.h"
#include "algorithms/recursive_doubling_allreduce.h"
#include "algorithms/halving_doubling_allreduce.h"
#include "algorithms/hierarchical_allreduce.h"
#include "algorithms/hierarchical_allgather.h"
#include "algorithms/hierarchical_broadcast.h"
#include "algorithms/hierarchical_reduce_scatter.h"
#include "algorithms/ring_reduce_scatter.h"
#include "algorithms/recursive_halving_reduce_scatter.h"
#include "algorithms/binomial_reduce.h"
#include "algorithms/reduce_scatter_gather_reduce.h"

namespace chorus::algorithms {

namespace {
constexpr Algorithm algorithm_table[] = {
    {Collective::allreduce, "ring", ring_allreduce_supports, ring_allreduce_cost, ring_allreduce_plan},
    {Collective::allreduce, "recursive_doubling", recursive_doubling_allreduce_supports,
     recursive_doubling_allreduce_cost, recursive_doubling_allreduce_plan},
    {Collective::allreduce, "halving_doubling", halving_doubling_allreduce_supports, halving_doubling_allreduce_cost,
     halving_doubling_allreduce_plan},
    {Collective::allreduce, "hierarchical", hierarchical_allreduce_supports, hierarchical_allreduce_cost,
     hierarchical_allreduce_plan, hierarchical_tuning},
    {Collective::allreduce, "hierarchical_leader", hierarchical_leader_allreduce_supports,
     hierarchical_leader_allreduce_cost, hierarchical_leader_allreduce_plan, hierarchical_tuning},
    {Collective::reduce_scatter, "ring", ring_reduce_scatter_supports, ring_reduce_scatter_cost,
     ring_reduce_scatter_plan},
    {Collective::reduce_scatter, "recursive_halving", recursive_halving_reduce_scatter_supports,
     recursive_halving_reduce_scatter_cost, recursive_halving_reduce_scatter_plan},
    {Collective::reduce_scatter, "hierarchical", hierarchical_reduce_scatter_supports,
     hierarchical_reduce_scatter_cost, hierarchical_reduce_scatter_plan},
    {Collective::reduce, "binomial", binomial_reduce_supports, binomial_reduce_cost, binomial_reduce_plan},
    {Collective::reduce, "reduce_scatter_gather", reduce_scatter_gather_reduce_supports,
     reduce_scatter_gather_reduce_cost, reduce_scatter_gather_reduce_plan},
    {Collective::broadcast, "binomial", binomial_broadcast_supports, binomial_broadcast_cost,
     binomial_broadcast_plan},
    {Collective::barrier, "dissemination", dissemination_barrier_supports, dissemination_barrier_cost,
     dissemination_barrier_plan},
    {Collective::broadcast, "scatter_allgather", scatter_allgather_broadcast_supports,
     scatter_allgather_broadcast_cost, scatter_allgather_broadcast_plan},
    {Collective::broadcast, "chain", chain_broadcast_supports, chain_broadcast_cost, chain_broadcast_plan,
     chain_broadcast_tuning},
    {Collective::broadcast, "hierarchical", hierarchical_broadcast_supports, hierarchical_broadcast_cost,
     hierarchical_broadcast_plan, hierarchical_tuning},
    {Collective::allgather, "ring", ring_allgather_supports, ring_allgather_cost, ring_allgather_plan},
    {Collective::allgather, "recursive_doubling", recursive_doubling_allgather_supports,
     recursive_doubling_allgather_cost, recursive_doubling_allgather_plan},
    {Collective::allgather, "bruck", bruck_allgather_supports, bruck_allgather_cost, bruck_allgather_plan},
    {Collective::allgather, "hierarchical", hierarchical_allgather_supports, hierarchical_allgather_cost,
     hierarchical_allgather_plan},
    {Collective::gather, "linear", linear_gather_supports, linear_gather_scatter_cost, linear_gather_plan},
    {Collective::gather, "binomial", binomial_gather_supports, binomial_gather_scatter_cost, binomial_gather_plan},
    {Collective::scatter, "linear", linear_scatter_supports, linear_gather_scatter_cost, linear_scatter_plan},
    {Collective::scatter, "binomial", binomial_scatter_supports, binomial_gather_scatter_cost,
     binomial_scatter_plan},
    {Collective::alltoall, "pairwise", pairwise_alltoall_supports, pairwise_alltoall_cost, pairwise_alltoall_plan},
    {Collective::alltoall, "bruck", bruck_alltoall_supports, bruck_alltoall_cost, bruck_alltoall_plan},
};

}  // namespace

std::span<const Algorithm> all_algorithms() { return algorithm_table; }

PlanTuning plan_tuning(const Algorithm& algorithm, const Call& call, const CostModel& model) {
  return algorithm.tune ? algorithm.tune(call, model) : PlanTuning{};
}

const Algorithm* find_algorithm(Collective collective, std::string_view name) {
  for (const Algorithm& algorithm : algorithm_table)
    if (algorithm.collective == collective && algorithm.name == name) return &algorithm;
  return nullptr;
}

std::string algorithm_names(Collective collective) {
  std::string names;
  for (const Algorithm& algorithm : algorithm_table) {
    if (algorithm.collective != collective) continue;
    if (!names.empty()) names += ", ";
    names += algorithm.name;
  }
  return names;
}

}  // namespace chorus::algorithms
