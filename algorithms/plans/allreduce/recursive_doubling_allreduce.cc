// Recursive doubling allreduce as a Plan. The buffer is cut into segments so
// that round k+1 of one segment starts as soon as round k of that segment is
// reduced, and so received data waits in a few bounded scratch slots.
#include "algorithms/plans/allreduce/recursive_doubling_allreduce.h"

#include "algorithms/model/power_of_two_fold.h"
#include "algorithms/model/recursive_phases.h"
#include "algorithms/model/reduction_segments.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace chorus::algorithms {

namespace {

bool recursive_doubling_allreduce_supports(const Call& call) { return call.collective == Collective::allreduce; }

// On ranks spread over hosts, each round costs the link its pairs cross:
// the local one where every pair of the round shares a host, the remote
// one otherwise, whose bytes then go as many times over a host's uplink as
// that host has ranks whose partner is elsewhere (the remote beta is the
// uplink's, which they share). With ranks numbered host by host the first
// rounds stay within each host: 2 hosts x 2 ranks pay one local round and
// one remote. Priced flat at two remote rounds, `auto` took the
// `hierarchical` Plan (a local reduce-scatter, the rails, a local
// allgather) at 8-512 B in network namespaces, where recursive doubling
// was 1.3-1.6x faster (benchmarks/README.md, "auto across hosts prices
// recursive doubling by round").
double recursive_doubling_allreduce_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const PowerOfTwoFold fold(0, call.size);
  const double bytes = static_cast<double>(call.bytes());
  const bool two_levels = call.topology && call.topology->size() == call.size && call.topology->hosts() > 1;
  if (!two_levels) {
    const double round = model.alpha_seconds + bytes * (model.beta_seconds_per_byte + model.gamma_seconds_per_byte);
    return log2_of_power(fold.power()) * round + allreduce_fold_cost(fold, bytes, model);
  }
  const Topology& topology = *call.topology;
  // The link of a round whose pairs are `pairs` (a, b): local, or remote
  // with the busiest host's crossing ranks sharing its uplink.
  std::vector<int> crossing(static_cast<size_t>(topology.hosts()));
  const auto round_model = [&](const std::vector<std::pair<int, int>>& pairs) {
    std::fill(crossing.begin(), crossing.end(), 0);
    int busiest = 0;
    for (const auto& [a, b] : pairs)
      if (!topology.same_host(a, b))
        for (int rank : {a, b}) busiest = std::max(busiest, ++crossing[static_cast<size_t>(topology.host_of(rank))]);
    CostModel link = model.at(busiest == 0 ? LinkLevel::local : LinkLevel::remote);
    link.beta_seconds_per_byte *= std::max(busiest, 1);
    return link;
  };
  double cost = 0;
  std::vector<std::pair<int, int>> pairs;
  for (int distance = 1; distance < fold.power(); distance *= 2) {
    pairs.clear();
    for (int n = 0; n < fold.power(); ++n)
      if (n < (n ^ distance)) pairs.emplace_back(fold.rank_of(n), fold.rank_of(n ^ distance));
    const CostModel link = round_model(pairs);
    cost += link.alpha_seconds + bytes * (link.beta_seconds_per_byte + link.gamma_seconds_per_byte);
  }
  // The folded pairs are relative ranks 2i and 2i + 1 (root 0: the ranks themselves).
  pairs.clear();
  for (int i = 0; i < fold.extras(); ++i) pairs.emplace_back(2 * i, 2 * i + 1);
  return cost + allreduce_fold_cost(fold, bytes, round_model(pairs));
}

Plan recursive_doubling_allreduce_plan(const Call& call, const PlanTuning& tuning) {
  return folded_allreduce_plan(call, tuning, 1, exchange_all);
}

}  // namespace

constexpr AlgorithmFunctions recursive_doubling_allreduce{recursive_doubling_allreduce_supports,
                                                          recursive_doubling_allreduce_cost,
                                                          recursive_doubling_allreduce_plan};

}  // namespace chorus::algorithms
