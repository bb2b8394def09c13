// Small broadcasts on a board's ring (board_exchange.h): a root that does
// not wait for anyone, and receivers that wait for the root alone.
//
// A broadcast on the two slots (board_exchange.cc) makes its root wait for
// its left neighbour's stamp, the root check that finds a member naming
// another root in the call itself, and lets no member be more than two
// board calls ahead of another. Back to back, an MPI root does neither: its
// eager sends return at once, and its receivers catch up later. So a
// broadcast of up to kRingDataBytes runs here instead: every member owns a
// ring of kRingEntries entries (a header line, then the data), and ring
// call r writes entry r % kRingEntries.
//
//   - The root copies its data into its entry, stamps it and returns. Its
//     root check (its left neighbour's entry of the same call shows the
//     same call and root) is deferred: settled when the entry has arrived,
//     as any later board call starts (next_call), as every
//     kRingCheckBatch-th ring call starts, when a call on messages is
//     announced, and as the Context ends (settle_board_checks). A
//     disagreement then fails the Communicator with MismatchError: in
//     this call on every member that waits on the ring; at the root in its
//     next call of another kind, as the deferred root checks on messages do
//     (deferred_root_checks.h), or within kRingCheckBatch of its ring calls.
//   - Every other member stamps its entry (what its right neighbour
//     checks), waits for the root's entry (whose signature shows the root
//     and count the root named) and copies the data out. It checks its
//     left neighbour's entry there if it has arrived, else defers that
//     check as the root does: a receiver does not wait for a neighbour
//     that is late (at 8 ranks on 2 cores waiting made every member wait
//     for the one before it, 1.2 µs a call against 0.94).
//   - A member writes entry r again only once every peer's ring_finished
//     is at least r - kRingEntries: each says so once it no longer reads
//     that entry, and only once its check of that call is settled (so its
//     left neighbour's entry stays until it is read). No member
//     infers another's progress from its stamps here, unlike the slots,
//     because a member with a pending check reads an older entry than the
//     one it stamped.
//
// Why no member waits forever on another: a member settles, waiting, the
// checks of calls more than kRingRunAhead (kRingEntries - 2) back as each
// ring call starts, so a member that has started ring call r, or finished
// r - 1 and left the board, reports at least r - kRingEntries, which is all
// a later call's writer waits for; and a check only waits for an entry its
// left neighbour wrote when it started that call.
#include <algorithm>
#include <cstring>
#include <limits>

#include "algorithms/shared_memory/board_exchange.h"
#include "algorithms/shared_memory/board_wait.h"
#include "base/copy.h"
#include "base/peer_order.h"

namespace chorus::algorithms {

void Board::ring_broadcast(const Communicator& communicator, const Call& call, void* data, uint32_t sequence,
                           Deadline deadline, int source) {
  const uint64_t number = ring_calls_ + 1;
  const Wait wait{communicator, call, sequence, 0, stamp_of(number, sequence), call_signature(call), deadline, {}};
  announce(sequence, wait.signature, call.root, /*on_board=*/true);
  // This member's own old checks first, every kRingCheckBatch calls (a
  // peer's room may wait on them): settled one a call, each read a line its
  // neighbour had just written; and waiting, those kRingRunAhead back.
  // (Before this call counts: what it reports finished must not include it.)
  const uint64_t wait_through = number > kRingRunAhead + 1 ? number - kRingRunAhead - 1 : 0;
  if (ring_checks_pending() && (number % kRingCheckBatch == 0 || ring_checked_through_ < wait_through))
    settle_ring_checks(communicator, deadline, wait_through);
  make_ring_room(wait, number);
  ring_calls_ = number;

  RingEntry& mine = ring_entry(rank_, number);
  const size_t bytes = call.bytes();
  if (rank_ == source) copy_bytes(data_of(mine, bytes), data, bytes);
  mine.signature.store(wait.signature, std::memory_order_relaxed);
  mine.root.store(static_cast<uint64_t>(call.root), std::memory_order_relaxed);
  before_peers_hear();
  mine.stamp.store(wait.stamp, std::memory_order_release);

  const int left = (rank_ + size_ - 1) % size_;
  if (rank_ == source) {
    // Settled by a later call (back to back, the neighbour is seldom there
    // yet): its ring_finished stays where it was.
    defer_ring_check(wait, number);
    return;
  }
  await_ring_entry(wait, source, number);
  copy_bytes(data, data_of(ring_entry(source, number), bytes), bytes);
  if (left != source) {
    // Checked now where the neighbour's entry is there, else later: a
    // receiver that waited for its neighbour here made the ring's members
    // wait for each other in turn (at 8 ranks on 2 cores, 1.2 µs a call
    // against Open MPI's 0.7).
    RingEntry& theirs = ring_entry(left, number);
    if (theirs.stamp.load(std::memory_order_acquire) == wait.stamp)
      await_ring_entry(wait, left, number);
    else
      defer_ring_check(wait, number);
  }
  publish_ring_finished();
}

void Board::defer_ring_check(const Wait& wait, uint64_t ring_call) {
  const Call& call = wait.call;
  PendingRingCheck& pending = pending_ring_checks_[ring_call % kRingEntries];
  pending.ring_call = ring_call;
  pending.stamp = wait.stamp;
  pending.signature = wait.signature;
  pending.sequence = wait.sequence;
  pending.count = call.count;
  pending.type = call.type;
  pending.root = call.root;
  pending.previous_root = call.previous_root;
  pending.group_digest = call.group_digest;
}

void Board::await_ring_entry(const Wait& wait, int member, uint64_t ring_call) {
  RingEntry& theirs = ring_entry(member, ring_call);
  const WordEquals arrived{theirs.stamp, wait.stamp};
  if (!arrived()) wait_until(wait, member, &theirs.stamp, arrived);
  after_peer_heard();
  const uint64_t signature = theirs.signature.load(std::memory_order_relaxed);
  if (signature != wait.signature) mismatch(wait, member, signature, theirs.root.load(std::memory_order_relaxed));
}

void Board::make_ring_room(const Wait& wait, uint64_t ring_call) {
  if (ring_call <= kRingEntries || least_known_ring_finished_ + kRingEntries >= ring_call) return;
  const uint64_t needed = ring_call - kRingEntries;
  uint64_t least = std::numeric_limits<uint64_t>::max();
  for (int member = 0; member < size_; ++member) {
    if (member == rank_) continue;
    uint64_t& known = known_ring_finished_[static_cast<size_t>(member)];
    if (known < needed) {
      const MemberLine& theirs = line(member);
      const WordAtLeast finished{theirs.ring_finished, needed};
      if (!finished()) wait_until(wait, member, nullptr, finished);
      after_peer_heard();
      known = theirs.ring_finished.load(std::memory_order_acquire);
    }
    least = std::min(least, known);
  }
  least_known_ring_finished_ = least;
}

void Board::settle_ring_checks(const Communicator& communicator, Deadline deadline, uint64_t wait_through) {
  const int left = (rank_ + size_ - 1) % size_;
  while (ring_checked_through_ < ring_calls_) {
    const uint64_t number = ring_checked_through_ + 1;
    PendingRingCheck& pending = pending_ring_checks_[number % kRingEntries];
    if (pending.ring_call == number) {
      RingEntry& theirs = ring_entry(left, number);
      const bool arrived = theirs.stamp.load(std::memory_order_acquire) == pending.stamp;
      if (!arrived && number > wait_through) break;
      if (!arrived || theirs.signature.load(std::memory_order_relaxed) != pending.signature) {
        // The slow path, in the words of the call it belongs to (its
        // sequence, its timeout counted from now).
        Call call = make_call(Collective::broadcast, rank_, size_, pending.count, pending.type, ReduceOp::sum,
                              pending.root, true);
        call.group_digest = pending.group_digest;
        call.previous_root = pending.previous_root;
        const Wait wait{communicator, call, pending.sequence, 0, pending.stamp, pending.signature, deadline, {}};
        await_ring_entry(wait, left, number);
      }
      after_peer_heard();
      pending.ring_call = 0;
    }
    ring_checked_through_ = number;
  }
  publish_ring_finished();
}

void Board::publish_ring_finished() {
  // Calls whose check this member settled in the call hold nothing back.
  while (ring_checked_through_ < ring_calls_ &&
         pending_ring_checks_[(ring_checked_through_ + 1) % kRingEntries].ring_call != ring_checked_through_ + 1)
    ++ring_checked_through_;
  if (ring_checked_through_ == published_ring_finished_) return;
  published_ring_finished_ = ring_checked_through_;
  line(rank_).ring_finished.store(ring_checked_through_, std::memory_order_release);
}

}  // namespace chorus::algorithms
