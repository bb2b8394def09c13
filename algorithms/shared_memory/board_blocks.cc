// The block collectives on a board (board_exchange.h): allgather,
// reduce_scatter and alltoall of fixed counts, in one board call where the
// whole of what a member publishes fits a one-shot call, else in pieces.
//
// A piece is one board call that moves elements [first, first + n) of every
// block: a member packs those elements of the blocks it contributes into its
// slot, one after another in member order, and takes its own from every
// slot. A reduce_scatter or alltoall member packs every peer's block but not
// its own, which it takes from its input: a block through a slot is two
// copies, and at 2 members its own block is half of what it moves. In
// pieces a slot holds up to piece_bytes(), so an allgather moves n =
// piece_bytes() / element elements of its block per call, and a
// reduce_scatter or alltoall piece_bytes() / ((members - 1) x element).
// Every piece is a board call of its own (stamped, waited for and made room
// for as any other), so the two-slot rule (board.h) covers them unchanged.
#include <algorithm>
#include <cstring>

#include "algorithms/shared_memory/board_exchange.h"
#include "algorithms/shared_memory/board_wait.h"
#include "base/copy.h"
#include "base/reduce.h"

namespace chorus::algorithms {

namespace {

// The copy into a block collective's output: streaming where the members'
// outputs together (`block_bytes` x members x members) are past the cache,
// so that the slots and inputs stay in it.
using Copy = void (*)(void*, const void*, size_t);
Copy output_copy(size_t block_bytes, int members) {
  const size_t m = static_cast<size_t>(members);
  return streams_past_cache(block_bytes * m * m) ? stream_copy : copy_bytes;
}

// Where `reader`'s piece sits in `writer`'s slot of a reduce_scatter or
// alltoall: the writer packs every member's piece but its own, in member order.
size_t packed_index(int reader, int writer) { return static_cast<size_t>(reader < writer ? reader : reader - 1); }

}  // namespace

void Board::copy_slots(const Wait& wait, std::byte* output, size_t block_stride, size_t bytes, const std::byte* own) {
  const Copy copy = output_copy(block_stride, size_);
  // Each member starts with the next member's slot, so they spread their reads.
  for (int step = 0; step < size_; ++step) {
    const int member = (rank_ + step) % size_;
    std::byte* block = output + static_cast<size_t>(member) * block_stride;
    if (member == rank_) {
      if (block != own) copy(block, own, bytes);
      continue;
    }
    await_slot(wait, member);
    copy(block, slot_data(member, wait), bytes);
  }
}

void Board::copy_packed_slots(const Wait& wait, std::byte* output, size_t block_stride, size_t bytes,
                              const std::byte* own) {
  const Copy copy = output_copy(block_stride, size_);
  for (int step = 0; step < size_; ++step) {
    const int member = (rank_ + step) % size_;
    std::byte* block = output + static_cast<size_t>(member) * block_stride;
    if (member == rank_) {
      copy(block, own, bytes);
      continue;
    }
    await_slot(wait, member);
    copy(block, slot_data(member, wait) + packed_index(rank_, member) * bytes, bytes);
  }
}

void Board::reduce_packed_slots(const Wait& wait, std::byte* output, size_t count, const std::byte* own) {
  const Call& call = wait.call;
  const size_t element = call.element_bytes();
  const size_t bytes = count * element;
  for (int member = 0; member < size_; ++member)
    if (member != rank_) await_slot(wait, member);
  // Chunk by chunk, so that the output's chunk stays in the cache while
  // every member's is reduced into it: one trip to memory for the output,
  // not one per member.
  const size_t per_chunk = std::max<size_t>(1, kReduceChunkBytes / element);
  // In place, the first member's chunk would land on this member's own
  // before it is reduced: that is kept aside first.
  const bool in_place = own == output && rank_ != 0;
  if (in_place) own_piece_.resize(per_chunk * element);
  for (size_t first = 0; first < count; first += per_chunk) {
    const size_t n = std::min(per_chunk, count - first);
    const size_t offset = first * element;
    std::byte* to = output + offset;
    const std::byte* mine = own + offset;
    if (in_place) {
      copy_bytes(own_piece_.data(), mine, n * element);
      mine = own_piece_.data();
    }
    // In member order, whatever this member's place: every algorithm's
    // reduce_scatter reduces the same way.
    for (int member = 0; member < size_; ++member) {
      const std::byte* theirs =
          member == rank_ ? mine
                          : slot_data(member, wait) + packed_index(rank_, member) * bytes + offset;
      if (member == 0)
        copy_bytes(to, theirs, n * element);
      else
        reduce_unchecked(call.type, call.op, to, theirs, n);
    }
    if (call.op == ReduceOp::avg) average_unchecked(call.type, to, n, static_cast<size_t>(size_));
  }
}

size_t Board::block_piece_count(const Call& call) const {
  const size_t blocks_in_slot = call.collective == Collective::allgather ? 1 : static_cast<size_t>(size_ - 1);
  return std::max<size_t>(1, slot_bytes_ / (blocks_in_slot * call.element_bytes()));
}

void Board::blocks(const Communicator& communicator, const Call& call, const void* input, void* output,
                   uint32_t sequence, Deadline deadline) {
  const size_t element = call.element_bytes();
  const auto* from = static_cast<const std::byte*>(input);
  auto* to = static_cast<std::byte*>(output);
  const size_t members = static_cast<size_t>(size_);
  const size_t rank = static_cast<size_t>(rank_);
  // One shot where it fits: the pieces are then the whole blocks.
  const size_t blocks_in_slot = call.collective == Collective::allgather ? 1 : members - 1;
  const bool one_shot = call.bytes() * blocks_in_slot <= capacity_;
  const size_t per_piece = one_shot ? call.count : block_piece_count(call);
  for (size_t first = 0; first < call.count; first += per_piece) {
    const size_t count = std::min(per_piece, call.count - first);
    const size_t bytes = count * element;
    const Wait wait = next_call(communicator, call, sequence, deadline);
    std::byte* mine = claim_slot(wait);
    if (call.collective == Collective::allgather) {
      copy_bytes(mine, from + first * element, bytes);
      stamp_slot(wait, 0);
      copy_slots(wait, to + first * element, call.bytes(), bytes, from + first * element);
    } else {
      for (size_t member = 0, packed = 0; member < members; ++member)
        if (member != rank) copy_bytes(mine + packed++ * bytes, from + (member * call.count + first) * element, bytes);
      stamp_slot(wait, 0);
      const std::byte* own = from + (rank * call.count + first) * element;
      if (call.collective == Collective::reduce_scatter)
        reduce_packed_slots(wait, to + first * element, count, own);
      else
        copy_packed_slots(wait, to + first * element, call.bytes(), bytes, own);
    }
    least_known_finished_ = wait.call_number - 1;  // every peer arrived in this call
    finish(wait.call_number);
  }
}

}  // namespace chorus::algorithms
