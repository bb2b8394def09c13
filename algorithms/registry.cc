// The table of algorithms.
#include "algorithms/registry.h"

#include "algorithms/binomial_broadcast.h"
#include "algorithms/dissemination_barrier.h"
#include "algorithms/ring_allreduce.h"

namespace chorus::algorithms {

namespace {
constexpr Algorithm algorithm_table[] = {
    {Collective::allreduce, "ring", ring_allreduce_supports, ring_allreduce_cost, ring_allreduce_plan},
    {Collective::broadcast, "binomial", binomial_broadcast_supports, binomial_broadcast_cost,
     binomial_broadcast_plan},
    {Collective::barrier, "dissemination", dissemination_barrier_supports, dissemination_barrier_cost,
     dissemination_barrier_plan},
};
}  // namespace

std::span<const Algorithm> all_algorithms() { return algorithm_table; }

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
