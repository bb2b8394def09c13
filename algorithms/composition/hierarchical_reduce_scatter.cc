// Two-level reduce-scatter as a composed Plan.
//
// Blocks are cut into segments; a message's slot is the index of its segment
// among all segments of the input, so both ends agree without counting.
// Round 1's received segments land in a few scratch lanes reused round
// robin and are reduced into the agent's accumulator: the output for the
// agent's own block, a scratch area for a foreign block's partial sum (which
// a single-rank host skips: its partial is its input). Round 2 lands in the
// same lanes and reduces into the output.
#include "algorithms/composition/hierarchical_reduce_scatter.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <vector>

#include "algorithms/model/block_layout.h"
#include "algorithms/composition/composed_plan.h"
#include "algorithms/composition/hierarchy.h"
#include "algorithms/plans/reduce_scatter/ring_reduce_scatter.h"

namespace chorus::algorithms {

namespace {


// Who sums host `host`'s contributions to block b.
int agent(const Topology& topology, int block, int host) {
  if (topology.host_of(block) == host) return block;
  const std::vector<int>& ranks = topology.ranks_on(host);
  return ranks[static_cast<size_t>(topology.local_rank(block)) % ranks.size()];
}

bool hierarchical_reduce_scatter_supports(const Call& call) {
  return reduce_scatter_call_is_valid(call) && has_two_levels(call);
}

double hierarchical_reduce_scatter_cost(const Call& call, const CostModel& model) {
  if (!has_two_levels(call)) return std::numeric_limits<double>::infinity();
  const Topology& topology = *call.topology;
  const double block = static_cast<double>(call.total_count() * call.element_bytes()) / call.size;
  const CostModel local = model.at(LinkLevel::local), remote = model.at(LinkLevel::remote);
  double latency = 0, uplink = 0, memory = 0, reduction = 0;
  for (int host = 0; host < topology.hosts(); ++host) {
    const double ranks = static_cast<double>(topology.ranks_on(host).size());
    const double others = topology.size() - ranks;
    const double agent_of = 1 + std::ceil(others / ranks);  // blocks one rank sums for its host
    latency = std::max(latency, (ranks - 1) * agent_of * local.alpha_seconds +
                                    (topology.hosts() - 1 + agent_of - 1) * remote.alpha_seconds);
    uplink = std::max(uplink, std::max(others, ranks * (topology.hosts() - 1)) * block * remote.beta_seconds_per_byte);
    memory = std::max(memory, (ranks - 1) * agent_of * block * local.beta_seconds_per_byte);
    reduction = std::max(reduction, ((ranks - 1) * agent_of + topology.hosts() - 1) * block *
                                        model.gamma_seconds_per_byte);
  }
  return latency + std::max(uplink, memory) + reduction;
}

Plan hierarchical_reduce_scatter_plan(const Call& call, const PlanTuning& tuning) {
  if (!hierarchical_reduce_scatter_supports(call))
    throw InvalidArgument(cat("rank ", call.rank, ": reduce_scatter algorithm 'hierarchical' needs an out-of-place "
                              "call on ranks on two or more hosts with some host holding two or more"));
  const Topology& topology = *call.topology;
  const int rank = call.rank, host = topology.host_of(rank), hosts = topology.hosts();
  const std::vector<int>& local = topology.ranks_on(host);
  const std::vector<size_t> offsets = prefix_byte_offsets(block_counts(call), call.element_bytes());
  const size_t segment_bytes = segment_bytes_of(tuning, call.element_bytes());
  auto bytes_of = [&](int block) {
    return offsets[static_cast<size_t>(block) + 1] - offsets[static_cast<size_t>(block)];
  };
  // Index of every block's first segment among all segments.
  std::vector<size_t> first_segment(static_cast<size_t>(call.size) + 1, 0);
  for (int block = 0; block < call.size; ++block)
    first_segment[static_cast<size_t>(block) + 1] =
        first_segment[static_cast<size_t>(block)] + segment_count(bytes_of(block), segment_bytes);
  if (first_segment.back() > phase_slot_span)
    throw InvalidArgument(cat("rank ", call.rank, ": hierarchical reduce_scatter would need ", first_segment.back(),
                              " messages per round (more than 2^30); use larger segments"));
  auto slot = [&](int block, size_t offset) {
    return static_cast<uint32_t>(first_segment[static_cast<size_t>(block)] + offset / segment_bytes);
  };
  auto input_block = [&](int block) {
    return Region{BufferKind::input, offsets[static_cast<size_t>(block)], bytes_of(block)};
  };

  ComposedPlan plan(false);
  // The blocks this rank sums for its host, and where each sum accumulates.
  std::vector<int> agent_for;
  for (int block = 0; block < call.size; ++block)
    if (agent(topology, block, host) == rank) agent_for.push_back(block);
  const bool alone = local.size() == 1;
  std::vector<Region> accumulator(static_cast<size_t>(call.size));
  for (int block : agent_for) {
    Region& sum = accumulator[static_cast<size_t>(block)];
    if (block == rank)
      sum = Region{BufferKind::output, 0, bytes_of(block)};
    else if (alone)
      sum = input_block(block);
    else
      sum = Region{BufferKind::scratch, plan.reserve_scratch(bytes_of(block)), bytes_of(block)};
    if (sum.buffer != BufferKind::input && sum.length > 0) plan.copy(input_block(block), sum);
  }
  const size_t lanes = std::max<size_t>(tuning.scratch_segments, 2);
  size_t lane_bytes = 0;
  for (int block : agent_for) lane_bytes = std::max(lane_bytes, std::min(segment_bytes, bytes_of(block)));
  const size_t lane_base = plan.reserve_scratch(lanes * lane_bytes);
  size_t next_lane = 0;
  auto receive_and_reduce = [&](int peer, uint32_t slot_offset, int block) {
    const Region sum = accumulator[static_cast<size_t>(block)];
    for_each_segment(sum, segment_bytes, [&](Region target) {
      const Region landing{BufferKind::scratch, lane_base + (next_lane++ % lanes) * lane_bytes, target.length};
      plan.recv(peer, slot_offset + slot(block, target.offset - sum.offset), landing);
      plan.reduce(landing, target);
    });
  };

  // Round 1: within the host, each contribution to its block's agent.
  for (int block = 0; block < call.size; ++block) {
    const int receiver = agent(topology, block, host);
    if (receiver == rank) continue;
    for_each_segment(input_block(block), segment_bytes, [&](Region piece) {
      plan.send(piece, receiver, slot(block, piece.offset - offsets[static_cast<size_t>(block)]));
    });
  }
  for (int block : agent_for)
    for (int peer : local)
      if (peer != rank) receive_and_reduce(peer, 0, block);

  // Round 2: between hosts, each partial sum to its block's rank.
  for (int block : agent_for) {
    if (block == rank) continue;
    const Region sum = accumulator[static_cast<size_t>(block)];
    for_each_segment(sum, segment_bytes, [&](Region piece) {
      plan.send(piece, block, phase_slot_span + slot(block, piece.offset - sum.offset));
    });
  }
  for (int other = 0; other < hosts; ++other)
    if (other != host) receive_and_reduce(agent(topology, rank, other), phase_slot_span, rank);
  return std::move(plan).take();
}

}  // namespace

constexpr AlgorithmFunctions hierarchical_reduce_scatter{hierarchical_reduce_scatter_supports,
                                                         hierarchical_reduce_scatter_cost,
                                                         hierarchical_reduce_scatter_plan};

}  // namespace chorus::algorithms
