// Two-level allgather as a composed Plan.
//
// Round 1 (between hosts): rank b sends its block to relay(b, g), the rank of
// host g with local rank local_rank(b) mod (ranks on g), for every other
// host g. Round 2 (within a host): every rank sends its own block and the
// blocks it relays to each other rank of its host, in block order; the
// receiver knows which blocks each peer relays and posts them in the same
// order. Slots are block numbers, so both ends agree without counting.
#include "algorithms/composition/hierarchical_allgather.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <vector>

#include "algorithms/model/block_layout.h"
#include "algorithms/composition/composed_plan.h"
#include "algorithms/composition/hierarchy.h"

namespace chorus::algorithms {

namespace {


// The rank of `host` that receives rank b's block from the other hosts.
int relay(const Topology& topology, int block, int host) {
  const std::vector<int>& ranks = topology.ranks_on(host);
  return ranks[static_cast<size_t>(topology.local_rank(block)) % ranks.size()];
}

// The blocks `rank` passes on within its host: its own and those it relays.
std::vector<int> passed_on_by(const Topology& topology, int rank) {
  std::vector<int> blocks;
  const int host = topology.host_of(rank);
  for (int block = 0; block < topology.size(); ++block)
    if (block == rank || (topology.host_of(block) != host && relay(topology, block, host) == rank))
      blocks.push_back(block);
  return blocks;
}

bool hierarchical_allgather_supports(const Call& call) {
  return call.collective == Collective::allgather && has_two_levels(call) &&
         (call.counts.empty() || call.counts.size() == static_cast<size_t>(call.size));
}

double hierarchical_allgather_cost(const Call& call, const CostModel& model) {
  if (!has_two_levels(call)) return std::numeric_limits<double>::infinity();
  const Topology& topology = *call.topology;
  const double block = static_cast<double>(call.total_count() * call.element_bytes()) / call.size;
  const CostModel local = model.at(LinkLevel::local), remote = model.at(LinkLevel::remote);
  double latency = 0, uplink = 0, memory = 0;
  for (int host = 0; host < topology.hosts(); ++host) {
    const double ranks = static_cast<double>(topology.ranks_on(host).size());
    const double others = topology.size() - ranks;
    const double relayed = std::ceil(others / ranks);
    latency = std::max(latency, (topology.hosts() - 1) * remote.alpha_seconds +
                                    (ranks - 1) * (1 + relayed) * local.alpha_seconds);
    uplink = std::max(uplink, std::max(ranks * (topology.hosts() - 1), others) * block * remote.beta_seconds_per_byte);
    memory = std::max(memory, (ranks - 1) * (1 + relayed) * block * local.beta_seconds_per_byte);
  }
  return latency + std::max(uplink, memory);
}

Plan hierarchical_allgather_plan(const Call& call, const PlanTuning&) {
  if (!hierarchical_allgather_supports(call))
    throw InvalidArgument(cat("rank ", call.rank, ": allgather algorithm 'hierarchical' needs ranks on two or more "
                              "hosts with some host holding two or more"));
  const Topology& topology = *call.topology;
  const int rank = call.rank, host = topology.host_of(rank);
  const std::vector<size_t> offsets = prefix_byte_offsets(block_counts(call), call.element_bytes());
  auto block_region = [&](int block) {
    return block_range(BufferKind::output, offsets, static_cast<size_t>(block), static_cast<size_t>(block) + 1);
  };
  auto empty = [&](int block) { return block_region(block).length == 0; };
  ComposedPlan plan(call.in_place);
  const Region own = call.in_place ? block_region(rank) : Region{BufferKind::input, 0, block_region(rank).length};
  if (!call.in_place && !empty(rank)) plan.copy(own, block_region(rank));

  // Round 1: between hosts.
  for (int other = 0; other < topology.hosts(); ++other)
    if (other != host && !empty(rank)) plan.send(own, relay(topology, rank, other), static_cast<uint32_t>(rank));
  for (int block = 0; block < call.size; ++block)
    if (topology.host_of(block) != host && relay(topology, block, host) == rank && !empty(block))
      plan.recv(block, static_cast<uint32_t>(block), block_region(block));

  // Round 2: within the host.
  const std::vector<int>& local = topology.ranks_on(host);
  const std::vector<int> mine = passed_on_by(topology, rank);
  for (int peer : local) {
    if (peer == rank) continue;
    for (int block : mine)
      if (!empty(block))
        plan.send(block == rank ? own : block_region(block), peer, phase_slot_span + static_cast<uint32_t>(block));
  }
  for (int peer : local) {
    if (peer == rank) continue;
    for (int block : passed_on_by(topology, peer))
      if (!empty(block)) plan.recv(peer, phase_slot_span + static_cast<uint32_t>(block), block_region(block));
  }
  return std::move(plan).take();
}

}  // namespace

constexpr AlgorithmFunctions hierarchical_allgather{hierarchical_allgather_supports, hierarchical_allgather_cost,
                                                    hierarchical_allgather_plan};

}  // namespace chorus::algorithms
