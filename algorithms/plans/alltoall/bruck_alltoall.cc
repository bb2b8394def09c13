// Bruck alltoall as a Plan.
//
// 1. Rotate: slot i of scratch gets the input block for rank r + i.
// 2. Round k (d = 2^k): the slots whose index has bit k set are packed into
//    one message to rank r + d; the message from rank r - d is unpacked into
//    the same slots. A block for rank r + i moves by exactly the bits of i,
//    so after the last round slot i holds the block that rank r - i sent to r.
// 3. Slot i is copied to output block r - i.
// Local copies are chained one after another (they run on one thread
// anyway), so a single dependency on the latest one covers all before it.
#include "algorithms/plans/alltoall/bruck_alltoall.h"

#include "algorithms/model/block_layout.h"

namespace chorus::algorithms {

size_t bruck_alltoall_round_blocks(int size, int round) {
  size_t blocks = 0;
  for (int index = 0; index < size; ++index) blocks += (index >> round) & 1;
  return blocks;
}

namespace {

bool bruck_alltoall_supports(const Call& call) {
  return call.collective == Collective::alltoall && !call.variable() && !call.in_place;
}

double bruck_alltoall_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const double block = static_cast<double>(call.bytes());
  double seconds = 0, moved_blocks = 0;
  for (int round = 0; (1LL << round) < call.size; ++round) {
    const double blocks = static_cast<double>(bruck_alltoall_round_blocks(call.size, round));
    seconds += model.alpha_seconds + blocks * block * model.beta_seconds_per_byte;
    moved_blocks += 2 * blocks;
  }
  return seconds + (2.0 * call.size + moved_blocks) * block * model.gamma_seconds_per_byte;
}

Plan bruck_alltoall_plan(const Call& call, const PlanTuning&) {
  Plan plan;
  const int size = call.size, rank = call.rank;
  if (call.variable() || call.in_place)
    throw InvalidArgument(cat("rank ", rank, ": bruck alltoall needs a fixed count and separate buffers"));
  const size_t block = call.bytes();
  if (block == 0) return plan;
  auto input_block = [&](int r) { return Region{BufferKind::input, static_cast<size_t>(r) * block, block}; };
  auto output_block = [&](int r) { return Region{BufferKind::output, static_cast<size_t>(r) * block, block}; };
  if (size == 1) {
    plan.copy(input_block(0), output_block(0));
    return plan;
  }

  const size_t slots = static_cast<size_t>(size);
  const size_t pack_slots = bruck_alltoall_round_blocks(size, 0);  // bit 0: the most indices
  auto slot = [&](int i) { return Region{BufferKind::scratch, static_cast<size_t>(i) * block, block}; };
  auto outgoing_slot = [&](size_t j) { return Region{BufferKind::scratch, (slots + j) * block, block}; };
  auto incoming_slot = [&](size_t j) { return Region{BufferKind::scratch, (slots + pack_slots + j) * block, block}; };
  plan.scratch_bytes = (slots + 2 * pack_slots) * block;

  StepId last_local = no_step;
  // Two copies: input blocks r..P-1 then 0..r-1 are contiguous in both places.
  const size_t tail = static_cast<size_t>(size - rank) * block;
  last_local = plan.copy(Region{BufferKind::input, static_cast<size_t>(rank) * block, tail},
                         Region{BufferKind::scratch, 0, tail});
  if (rank > 0)
    last_local = plan.copy(Region{BufferKind::input, 0, static_cast<size_t>(rank) * block},
                           Region{BufferKind::scratch, tail, static_cast<size_t>(rank) * block}, {last_local});

  StepId previous_send = no_step;
  for (int round = 0; (1LL << round) < size; ++round) {
    const int distance = 1 << round;
    size_t packed = 0;
    // The previous round's message must be out before its buffer is refilled.
    for (int i = 0; i < size; ++i)
      if (i & distance) last_local = plan.copy(slot(i), outgoing_slot(packed++), {last_local, previous_send});
    const Region message{BufferKind::scratch, slots * block, packed * block};
    const Region arrival{BufferKind::scratch, (slots + pack_slots) * block, packed * block};
    const uint32_t tag = static_cast<uint32_t>(round);
    previous_send = plan.send(message, wrap_rank(rank + distance, size), tag, {last_local});
    // last_local also covers the previous round's unpacking out of `arrival`.
    const StepId received = plan.recv(wrap_rank(rank - distance, size), tag, arrival, {last_local});
    size_t unpacked = 0;
    for (int i = 0; i < size; ++i)
      if (i & distance) last_local = plan.copy(incoming_slot(unpacked++), slot(i), {last_local, received});
  }
  for (int i = 0; i < size; ++i) last_local = plan.copy(slot(i), output_block(wrap_rank(rank - i, size)), {last_local});
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions bruck_alltoall{bruck_alltoall_supports, bruck_alltoall_cost, bruck_alltoall_plan};

}  // namespace chorus::algorithms
