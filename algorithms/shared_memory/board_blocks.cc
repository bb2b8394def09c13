// The block collectives on a board (board_exchange.h): allgather,
// reduce_scatter and alltoall of fixed counts, in one board call where the
// whole of what a member publishes fits a one-shot call, else in pieces.
//
// A piece is one board call that moves elements [first, first + n) of every
// block: a member packs those elements of the blocks it contributes into its
// slot, one after another in member order, and takes its own from every
// slot. In pieces a slot holds up to piece_bytes(), so an allgather moves n
// = piece_bytes() / element elements of its block per call, and a
// reduce_scatter or alltoall, which publish a piece of every member's block,
// piece_bytes() / (members x element). Every piece is a board call of its
// own (stamped, waited for and made room for as any other), so the two-slot
// rule (board.h) covers them unchanged.
#include <algorithm>
#include <cstring>

#include "algorithms/shared_memory/board_exchange.h"
#include "algorithms/shared_memory/board_wait.h"
#include "base/copy.h"
#include "base/reduce.h"

namespace chorus::algorithms {

void Board::copy_slots(const Wait& wait, std::byte* output, size_t block_stride, size_t offset, size_t bytes,
                       const std::byte* own) {
  // Each member starts with the next member's slot, so they spread their reads.
  for (int step = 0; step < size_; ++step) {
    const int member = (rank_ + step) % size_;
    std::byte* block = output + static_cast<size_t>(member) * block_stride;
    if (member == rank_ && own) {
      if (block != own) copy_bytes(block, own, bytes);
      continue;
    }
    if (member != rank_) await_slot(wait, member);
    copy_bytes(block, data_of(slot(member, wait.call_number)) + offset, bytes);
  }
}

size_t Board::block_piece_count(const Call& call) const {
  const size_t per_member = call.collective == Collective::allgather ? 1 : static_cast<size_t>(size_);
  return std::max<size_t>(1, slot_bytes_ / (per_member * call.element_bytes()));
}

void Board::blocks(const Communicator& communicator, const Call& call, const void* input, void* output,
                   uint32_t sequence, Deadline deadline) {
  const size_t element = call.element_bytes();
  const auto* from = static_cast<const std::byte*>(input);
  auto* to = static_cast<std::byte*>(output);
  const size_t members = static_cast<size_t>(size_);
  const size_t rank = static_cast<size_t>(rank_);
  // One shot where it fits: the pieces are then the whole blocks.
  const bool one_shot = call.bytes() * (call.collective == Collective::allgather ? 1 : members) <= capacity_;
  const size_t per_piece = one_shot ? call.count : block_piece_count(call);
  for (size_t first = 0; first < call.count; first += per_piece) {
    const size_t count = std::min(per_piece, call.count - first);
    const size_t bytes = count * element;
    const Wait wait = next_call(communicator, call, sequence, deadline);
    std::byte* mine = claim_slot(wait);
    switch (call.collective) {
      case Collective::allgather:
        copy_bytes(mine, from + first * element, bytes);
        stamp_slot(wait, 0);
        copy_slots(wait, to + first * element, call.bytes(), 0, bytes, from + first * element);
        break;
      case Collective::reduce_scatter:
        for (size_t member = 0; member < members; ++member)
          copy_bytes(mine + member * bytes, from + (member * call.count + first) * element, bytes);
        stamp_slot(wait, 0);
        reduce_slots(wait, to + first * element, rank * bytes, count);
        break;
      default:  // alltoall
        for (size_t member = 0; member < members; ++member)
          copy_bytes(mine + member * bytes, from + (member * call.count + first) * element, bytes);
        stamp_slot(wait, 0);
        copy_slots(wait, to + first * element, call.bytes(), rank * bytes, bytes, nullptr);
        break;
    }
    least_known_finished_ = wait.call_number - 1;  // every peer arrived in this call
    finish(wait.call_number);
  }
}

}  // namespace chorus::algorithms
