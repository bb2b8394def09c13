// Recursive-doubling allgather as a Plan.
//
// Before round k rank r holds the 2^k blocks of its aligned group
// [r & ~(2^k - 1), +2^k); blocks are contiguous in rank order, so the group
// is one region of the output, sent whole to partner r ^ 2^k while the
// partner's group lands next to it. Rounds whose ranges are empty
// (allgatherv zeros) are skipped by both partners alike.
#include "algorithms/plans/allgather/recursive_doubling_allgather.h"

#include "algorithms/model/block_layout.h"

namespace chorus::algorithms {

namespace {
bool is_power_of_two(int value) { return value > 0 && (value & (value - 1)) == 0; }

bool recursive_doubling_allgather_supports(const Call& call) {
  return call.collective == Collective::allgather && is_power_of_two(call.size);
}

double recursive_doubling_allgather_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const double ranks = call.size;
  const double bytes = static_cast<double>(call.total_count() * call.element_bytes());
  return ceil_log2(call.size) * model.alpha_seconds + (ranks - 1) / ranks * bytes * model.beta_seconds_per_byte;
}

Plan recursive_doubling_allgather_plan(const Call& call, const PlanTuning&) {
  Plan plan;
  const int size = call.size, rank = call.rank;
  if (!is_power_of_two(size))
    throw InvalidArgument(
        cat("rank ", rank, ": recursive doubling allgather needs a power-of-two number of ranks, not ", size));
  const std::vector<size_t> offsets = prefix_byte_offsets(block_counts(call), call.element_bytes());
  const Region own = block_range(BufferKind::output, offsets, rank, rank + 1);
  StepId own_copied = no_step;
  if (!call.in_place && own.length > 0) own_copied = plan.copy(Region{BufferKind::input, 0, own.length}, own);

  // Each recv depends on the previous one: the next send must carry every
  // block gathered so far, and one dependency then covers them all.
  StepId last_received = no_step;
  for (int distance = 1; distance < size; distance *= 2) {
    const int partner = rank ^ distance;
    const size_t mine = static_cast<size_t>(rank & ~(distance - 1));
    const size_t theirs = static_cast<size_t>(partner & ~(distance - 1));
    Region outgoing = block_range(BufferKind::output, offsets, mine, mine + distance);
    // Round 0 sends only this rank's block: straight from the input.
    if (distance == 1 && !call.in_place) outgoing = Region{BufferKind::input, 0, own.length};
    const Region incoming = block_range(BufferKind::output, offsets, theirs, theirs + distance);
    const uint32_t slot = static_cast<uint32_t>(ceil_log2(distance));
    if (outgoing.length > 0) plan.send(outgoing, partner, slot, {last_received, own_copied});
    if (incoming.length > 0) last_received = plan.recv(partner, slot, incoming, {last_received});
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions recursive_doubling_allgather{recursive_doubling_allgather_supports,
                                                          recursive_doubling_allgather_cost,
                                                          recursive_doubling_allgather_plan};

}  // namespace chorus::algorithms
