// The whole table of Plans: the flat ones, then the Plans made of Plans.
#include "algorithms/selection/registry.h"

#include <vector>

#include "algorithms/composition/hierarchical_allgather.h"
#include "algorithms/composition/hierarchical_allreduce.h"
#include "algorithms/composition/hierarchical_broadcast.h"
#include "algorithms/composition/hierarchical_reduce_scatter.h"
#include "algorithms/plans/flat_plans.h"

namespace chorus::algorithms {
namespace {

// After the flat Plans of their collective, in each collective's order of
// preference where costs tie.
constexpr Algorithm composed_plan_table[] = {
    {Collective::allreduce, "hierarchical", &hierarchical_allreduce},
    {Collective::allreduce, "hierarchical_leader", &hierarchical_leader_allreduce},
    {Collective::reduce_scatter, "hierarchical", &hierarchical_reduce_scatter},
    {Collective::broadcast, "hierarchical", &hierarchical_broadcast},
    {Collective::allgather, "hierarchical", &hierarchical_allgather},
};

const std::vector<Algorithm>& table() {
  static const std::vector<Algorithm> every = [] {
    std::vector<Algorithm> algorithms(flat_plans().begin(), flat_plans().end());
    algorithms.insert(algorithms.end(), std::begin(composed_plan_table), std::end(composed_plan_table));
    return algorithms;
  }();
  return every;
}

}  // namespace

std::span<const Algorithm> all_algorithms() { return table(); }

const Algorithm* find_algorithm(Collective collective, std::string_view name) {
  for (const Algorithm& algorithm : table())
    if (algorithm.collective == collective && algorithm.name == name) return &algorithm;
  return nullptr;
}

std::string algorithm_names(Collective collective) {
  std::string names;
  for (const Algorithm& algorithm : table()) {
    if (algorithm.collective != collective) continue;
    if (!names.empty()) names += ", ";
    names += algorithm.name;
  }
  return names;
}

}  // namespace chorus::algorithms
