// Two-level allreduce Plans: rails of slice holders, and host leaders.
//
// Slot ranges keep the phases apart on a pair that two phases share: phase
// k's messages carry slots in [k, k + 1) * 2^30, and a rail's share of
// phase 2 is cut further by slice. Within phase 1 and phase 3 a message's
// slot is the index of its segment among all segments of the buffer, which
// both ends compute alike.
#include "algorithms/composition/hierarchical_allreduce.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "algorithms/composition/composed_plan.h"
#include "algorithms/composition/hierarchy.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {


// The buffer cut into slices (elements differ by at most one), each cut into
// segments of at most `segment_bytes`.
class Slices {
 public:
  Slices(const Call& call, int slices, size_t segment_bytes)
      : count_(call.count), slices_(static_cast<size_t>(slices)), element_bytes_(call.element_bytes()) {
    segment_elements_ = std::max<size_t>(1, segment_bytes / element_bytes_);
    first_segment_.assign(slices_ + 1, 0);
    for (size_t s = 0; s < slices_; ++s)
      first_segment_[s + 1] = first_segment_[s] + (elements(s) + segment_elements_ - 1) / segment_elements_;
    if (first_segment_.back() >= phase_slot_span)
      throw InvalidArgument(cat("rank ", call.rank, ": hierarchical allreduce of ", call.count,
                                " elements with segments of ", segment_bytes,
                                " bytes needs more than 2^30 messages per phase; use larger segments"));
  }

  size_t elements(size_t slice) const { return count_ / slices_ + (slice < count_ % slices_ ? 1 : 0); }
  size_t start(size_t slice) const { return slice * (count_ / slices_) + std::min(slice, count_ % slices_); }
  size_t start_bytes(size_t slice) const { return start(slice) * element_bytes_; }
  size_t segments(size_t slice) const { return first_segment_[slice + 1] - first_segment_[slice]; }
  size_t largest_segment_bytes() const { return std::min(segment_elements_, elements(0)) * element_bytes_; }
  Region segment(BufferKind buffer, size_t slice, size_t segment) const {
    const size_t first = segment * segment_elements_;
    const size_t length = std::min(segment_elements_, elements(slice) - first);
    return Region{buffer, (start(slice) + first) * element_bytes_, length * element_bytes_};
  }
  // Slot of a segment's message within a phase.
  uint32_t slot(size_t slice, size_t segment) const {
    return static_cast<uint32_t>(first_segment_[slice] + segment);
  }

 private:
  size_t count_, slices_, element_bytes_, segment_elements_;
  std::vector<size_t> first_segment_;
};

// Holder of slice s on host h: local rank s mod (ranks on h).
int holder(const Topology& topology, int host, size_t slice) {
  const std::vector<int>& ranks = topology.ranks_on(host);
  return ranks[slice % ranks.size()];
}

Call allreduce_among_hosts(const Call& call, int host, size_t count) {
  return phase_call(call, Collective::allreduce, host, call.topology->hosts(), count, 0, true);
}

void require_two_levels(const Call& call, const char* name) {
  if (!has_two_levels(call))
    throw InvalidArgument(cat("rank ", call.rank, ": allreduce algorithm '", name,
                              "' needs ranks on two or more hosts with some host holding two or more (topology: ",
                              call.topology ? call.topology->describe() : "one host", ")"));
}

// The cost of the slowest host for a per-host phase cost that depends only
// on the host's rank count (computed once per distinct count).
template <class PerHost>
double slowest_host(const Topology& topology, PerHost per_host) {
  std::map<size_t, double> by_size;
  double slowest = 0;
  for (int host = 0; host < topology.hosts(); ++host) {
    const size_t ranks = topology.ranks_on(host).size();
    if (ranks < 2) continue;
    auto known = by_size.find(ranks);
    if (known == by_size.end()) known = by_size.emplace(ranks, per_host(static_cast<int>(ranks))).first;
    slowest = std::max(slowest, known->second);
  }
  return slowest;
}

}  // namespace

namespace {

bool hierarchical_allreduce_supports(const Call& call) {
  return call.collective == Collective::allreduce && has_two_levels(call);
}

double hierarchical_allreduce_cost(const Call& call, const CostModel& model) {
  if (!has_two_levels(call)) return std::numeric_limits<double>::infinity();
  const Topology& topology = *call.topology;
  const int slices = topology.largest_host();
  const double slice_bytes = static_cast<double>(call.bytes()) / slices;
  const CostModel local = model.at(LinkLevel::local), remote = model.at(LinkLevel::remote);
  // The phases pipeline segment by segment, so their latencies add up but
  // only the busiest link's bytes count: the uplink, or the host's memory,
  // which carries the reduce-scatter and the allgather.
  double local_latency = 0, local_bytes_seconds = 0, exposed_reduction = 0;
  int most_held = 1;
  // As for the ring, reductions overlap the transfers but a pipeline fill.
  constexpr double exposed_reduction_bytes = 16 * 1024;
  for (int host = 0; host < topology.hosts(); ++host) {
    const int ranks = static_cast<int>(topology.ranks_on(host).size());
    const int held_most = (slices + ranks - 1) / ranks, held_least = slices / ranks;
    most_held = std::max(most_held, held_most);
    if (ranks < 2) continue;
    const double received = held_most * (ranks - 1) * slice_bytes;
    const double sent = (slices - held_least) * slice_bytes;
    local_latency = std::max(local_latency, 2.0 * (ranks - 1) * local.alpha_seconds);
    local_bytes_seconds = std::max(local_bytes_seconds, 2 * std::max(received, sent) * local.beta_seconds_per_byte);
    exposed_reduction = std::max(exposed_reduction, (ranks - 1) * std::min(slice_bytes, exposed_reduction_bytes) *
                                                        local.gamma_seconds_per_byte);
  }
  // Every rail of a host crosses its uplink: together they move what one
  // allreduce of the whole buffer among the hosts would. A rank holding
  // several slices runs their rails' messages one after another.
  CostModel latency_only = remote, bandwidth_only = remote;
  latency_only.beta_seconds_per_byte = latency_only.gamma_seconds_per_byte = 0;
  bandwidth_only.alpha_seconds = 0;
  const Call among_hosts = allreduce_among_hosts(call, 0, call.count);
  const double remote_latency = most_held * cheapest_flat(among_hosts, latency_only).seconds;
  const double remote_bytes_seconds = cheapest_flat(among_hosts, bandwidth_only).seconds;
  return local_latency + remote_latency + std::max(local_bytes_seconds, remote_bytes_seconds) + exposed_reduction;
}

Plan hierarchical_allreduce_plan(const Call& call, const PlanTuning& tuning) {
  require_two_levels(call, "hierarchical");
  ComposedPlan plan(call.in_place);
  if (call.count == 0) return std::move(plan).take();
  const Topology& topology = *call.topology;
  const int host = topology.host_of(call.rank);
  const std::vector<int>& local = topology.ranks_on(host);
  const size_t local_size = local.size(), local_rank = static_cast<size_t>(topology.local_rank(call.rank));
  const size_t slice_count = static_cast<size_t>(topology.largest_host());
  const Slices slices(call, static_cast<int>(slice_count), tuning.segment_bytes);
  auto held_here = [&](size_t slice) { return slice % local_size == local_rank; };
  const BufferKind own_data = call.in_place ? BufferKind::output : BufferKind::input;

  // Phase 1: reduce-scatter within the host.
  if (!call.in_place)
    for (size_t s = 0; s < slice_count; ++s)
      if (held_here(s))
        for (size_t g = 0; g < slices.segments(s); ++g)
          plan.copy(slices.segment(BufferKind::input, s, g), slices.segment(BufferKind::output, s, g));
  for (size_t s = 0; s < slice_count; ++s)
    if (!held_here(s))
      for (size_t g = 0; g < slices.segments(s); ++g)
        plan.send(slices.segment(own_data, s, g), holder(topology, host, s), slices.slot(s, g));
  if (local_size > 1) {
    const size_t lanes = std::max(tuning.scratch_segments, local_size - 1);
    const size_t lane_bytes = slices.largest_segment_bytes();
    const size_t scratch = plan.reserve_scratch(lanes * lane_bytes);
    size_t next_lane = 0;
    for (size_t s = 0; s < slice_count; ++s) {
      if (!held_here(s)) continue;
      for (size_t g = 0; g < slices.segments(s); ++g) {
        const Region target = slices.segment(BufferKind::output, s, g);
        for (int peer : local) {
          if (peer == call.rank) continue;
          const Region landing{BufferKind::scratch, scratch + (next_lane++ % lanes) * lane_bytes, target.length};
          plan.recv(peer, slices.slot(s, g), landing);
          plan.reduce(landing, target);
        }
      }
    }
  }

  // Phase 2: one allreduce per held slice among its holders on every host.
  const uint32_t rail_slots = phase_slot_span / static_cast<uint32_t>(slice_count);
  std::vector<int> rail(static_cast<size_t>(topology.hosts()));
  for (size_t s = 0; s < slice_count; ++s) {
    if (!held_here(s) || slices.elements(s) == 0) continue;
    for (int h = 0; h < topology.hosts(); ++h) rail[static_cast<size_t>(h)] = holder(topology, h, s);
    const Call phase = allreduce_among_hosts(call, host, slices.elements(s));
    const PhaseAlgorithm chosen = choose_phase_algorithm(phase, allreduce_among_hosts(call, host, call.count),
                                                         LinkLevel::remote, tuning, "ring");
    const uint32_t slot_base = phase_slot_span + static_cast<uint32_t>(s) * rail_slots;
    plan.append(chosen.algorithm->build(phase, chosen.tuning),
                {.members = rail,
                 .output_offset = slices.start_bytes(s),
                 .slot_base = slot_base,
                 .slot_limit = slot_base + rail_slots});
  }

  // Phase 3: allgather within the host.
  for (size_t s = 0; s < slice_count; ++s)
    if (held_here(s))
      for (size_t g = 0; g < slices.segments(s); ++g)
        for (int peer : local)
          if (peer != call.rank)
            plan.send(slices.segment(BufferKind::output, s, g), peer, 2 * phase_slot_span + slices.slot(s, g));
  for (size_t s = 0; s < slice_count; ++s)
    if (!held_here(s))
      for (size_t g = 0; g < slices.segments(s); ++g)
        plan.recv(holder(topology, host, s), 2 * phase_slot_span + slices.slot(s, g),
                  slices.segment(BufferKind::output, s, g));
  return std::move(plan).take();
}

bool hierarchical_leader_allreduce_supports(const Call& call) {
  return call.collective == Collective::allreduce && has_two_levels(call);
}

double hierarchical_leader_allreduce_cost(const Call& call, const CostModel& model) {
  if (!has_two_levels(call)) return std::numeric_limits<double>::infinity();
  const CostModel local = model.at(LinkLevel::local);
  const double within_host = slowest_host(*call.topology, [&](int ranks) {
    return cheapest_flat(phase_call(call, Collective::reduce, 0, ranks, call.count, 0, call.in_place), local)
               .seconds +
           cheapest_flat(phase_call(call, Collective::broadcast, 0, ranks, call.count, 0, true), local).seconds;
  });
  return within_host +
         cheapest_flat(allreduce_among_hosts(call, 0, call.count), model.at(LinkLevel::remote)).seconds;
}

Plan hierarchical_leader_allreduce_plan(const Call& call, const PlanTuning& tuning) {
  require_two_levels(call, "hierarchical_leader");
  ComposedPlan plan(call.in_place);
  if (call.count == 0) return std::move(plan).take();
  const Topology& topology = *call.topology;
  const int host = topology.host_of(call.rank);
  const std::vector<int>& local = topology.ranks_on(host);
  const int local_size = static_cast<int>(local.size()), local_rank = topology.local_rank(call.rank);
  const std::vector<int> leaders = host_leaders(topology, -1);

  // Phase 1: reduce to the host's leader (its local rank 0).
  if (local_size == 1) {
    if (!call.in_place)
      plan.copy(Region{BufferKind::input, 0, call.bytes()}, Region{BufferKind::output, 0, call.bytes()});
  } else {
    const Call phase = phase_call(call, Collective::reduce, local_rank, local_size, call.count, 0, call.in_place);
    const PhaseAlgorithm chosen = choose_phase_algorithm(phase, phase, LinkLevel::local, tuning, "binomial");
    plan.append(chosen.algorithm->build(phase, chosen.tuning),
                {.members = local, .in_place = call.in_place, .slot_limit = phase_slot_span});
  }

  // Phase 2: the leaders' allreduce.
  if (call.rank == leaders[static_cast<size_t>(host)]) {
    const Call phase = allreduce_among_hosts(call, host, call.count);
    const PhaseAlgorithm chosen =
        choose_phase_algorithm(phase, phase, LinkLevel::remote, tuning, "recursive_doubling");
    plan.append(chosen.algorithm->build(phase, chosen.tuning),
                {.members = leaders, .slot_base = phase_slot_span, .slot_limit = 2 * phase_slot_span});
  }

  // Phase 3: broadcast from the leader within the host.
  if (local_size > 1) {
    const Call phase = phase_call(call, Collective::broadcast, local_rank, local_size, call.count, 0, true);
    const PhaseAlgorithm chosen = choose_phase_algorithm(phase, phase, LinkLevel::local, tuning, "binomial");
    plan.append(chosen.algorithm->build(phase, chosen.tuning),
                {.members = local, .slot_base = 2 * phase_slot_span, .slot_limit = 3 * phase_slot_span});
  }
  return std::move(plan).take();
}

}  // namespace

constexpr AlgorithmFunctions hierarchical_allreduce{hierarchical_allreduce_supports, hierarchical_allreduce_cost,
                                                    hierarchical_allreduce_plan, hierarchical_tuning};
constexpr AlgorithmFunctions hierarchical_leader_allreduce{hierarchical_leader_allreduce_supports,
                                                           hierarchical_leader_allreduce_cost,
                                                           hierarchical_leader_allreduce_plan, hierarchical_tuning};

}  // namespace chorus::algorithms
