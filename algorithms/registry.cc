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
    {Collective::allreduce, "ring", &ring_allreduce},
    {Collective::allreduce, "recursive_doubling", &recursive_doubling_allreduce},
    {Collective::allreduce, "halving_doubling", &halving_doubling_allreduce},
    {Collective::allreduce, "hierarchical", &hierarchical_allreduce},
    {Collective::allreduce, "hierarchical_leader", &hierarchical_leader_allreduce},
    {Collective::reduce_scatter, "ring", &ring_reduce_scatter},
    {Collective::reduce_scatter, "recursive_halving", &recursive_halving_reduce_scatter},
    {Collective::reduce_scatter, "hierarchical", &hierarchical_reduce_scatter},
    {Collective::reduce, "binomial", &binomial_reduce},
    {Collective::reduce, "reduce_scatter_gather", &reduce_scatter_gather_reduce},
    {Collective::broadcast, "binomial", &binomial_broadcast},
    {Collective::barrier, "dissemination", &dissemination_barrier},
    {Collective::broadcast, "scatter_allgather", &scatter_allgather_broadcast},
    {Collective::broadcast, "chain", &chain_broadcast},
    {Collective::broadcast, "hierarchical", &hierarchical_broadcast},
    {Collective::allgather, "ring", &ring_allgather},
    {Collective::allgather, "recursive_doubling", &recursive_doubling_allgather},
    {Collective::allgather, "bruck", &bruck_allgather},
    {Collective::allgather, "hierarchical", &hierarchical_allgather},
    {Collective::gather, "linear", &linear_gather},
    {Collective::gather, "binomial", &binomial_gather},
    {Collective::scatter, "linear", &linear_scatter},
    {Collective::scatter, "binomial", &binomial_scatter},
    {Collective::alltoall, "pairwise", &pairwise_alltoall},
    {Collective::alltoall, "bruck", &bruck_alltoall},
};

}  // namespace

std::span<const Algorithm> all_algorithms() { return algorithm_table; }

PlanTuning plan_tuning(const Algorithm& algorithm, const Call& call, const CostModel& model) {
  return algorithm.tuned_by_model() ? algorithm.functions->tune(call, model) : PlanTuning{};
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
