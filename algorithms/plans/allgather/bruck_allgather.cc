// Bruck allgather as a Plan.
//
// Scratch holds blocks in rotated order: slot i is the block of rank r + i.
// Slot 0 starts as this rank's own block. In round k (distance d = 2^k) rank
// r sends slots [0, m) with m = min(d, P - d) to rank r - d, and receives
// slots [d, d + m) from rank r + d, whose slots [0, m) are exactly the blocks
// of ranks r + d .. r + d + m - 1. After the last round slots are copied to
// their place in the output: at most two contiguous copies, since the
// rotation wraps around once.
#include "algorithms/plans/allgather/bruck_allgather.h"

#include "algorithms/model/block_layout.h"

namespace chorus::algorithms {

namespace {

bool bruck_allgather_supports(const Call& call) { return call.collective == Collective::allgather; }

Plan bruck_allgather_plan(const Call& call, const PlanTuning&) {
  Plan plan;
  const int size = call.size, rank = call.rank;
  const size_t element = call.element_bytes();
  const std::vector<size_t> counts = block_counts(call);
  const std::vector<size_t> offsets = prefix_byte_offsets(counts, element);
  const Region own = block_range(BufferKind::output, offsets, rank, rank + 1);
  const Region own_data = call.in_place ? own : Region{BufferKind::input, 0, own.length};
  if (!call.in_place && own.length > 0) plan.copy(own_data, own);
  if (size == 1) return plan;

  std::vector<size_t> rotated_counts(static_cast<size_t>(size));
  for (int slot = 0; slot < size; ++slot) rotated_counts[slot] = counts[wrap_rank(rank + slot, size)];
  const std::vector<size_t> slots = prefix_byte_offsets(rotated_counts, element);
  plan.scratch_bytes = slots.back();

  StepId last_written = no_step;  // each recv depends on the previous: one id covers every slot filled so far
  if (own.length > 0) last_written = plan.copy(own_data, block_range(BufferKind::scratch, slots, 0, 1));
  for (int distance = 1; distance < size; distance *= 2) {
    const int held = std::min(distance, size - distance);
    const Region outgoing = block_range(BufferKind::scratch, slots, 0, held);
    const Region incoming = block_range(BufferKind::scratch, slots, distance, distance + held);
    const uint32_t slot = static_cast<uint32_t>(ceil_log2(distance));
    if (outgoing.length > 0) plan.send(outgoing, wrap_rank(rank - distance, size), slot, {last_written});
    if (incoming.length > 0)
      last_written = plan.recv(wrap_rank(rank + distance, size), slot, incoming, {last_written});
  }

  // Slots 1 .. P-r-1 are ranks r+1 .. P-1; slots P-r .. P-1 are ranks 0 .. r-1.
  const size_t tail_slots = static_cast<size_t>(size - rank);
  const Region after_own = block_range(BufferKind::scratch, slots, 1, tail_slots);
  const Region before_own = block_range(BufferKind::scratch, slots, tail_slots, static_cast<size_t>(size));
  if (after_own.length > 0)
    plan.copy(after_own, block_range(BufferKind::output, offsets, rank + 1, static_cast<size_t>(size)), {last_written});
  if (before_own.length > 0)
    plan.copy(before_own, block_range(BufferKind::output, offsets, 0, rank), {last_written});
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions bruck_allgather{bruck_allgather_supports, relayed_blocks_cost, bruck_allgather_plan};

}  // namespace chorus::algorithms
