// Root checks (root_check.h) that a rank which only sends in its Plan does
// not wait for: a reduce's leaves, and the senders of any rooted call on a
// Context too large for late_root_checks.h.
//
// Why: the root of a small broadcast (or a scatter's root, a gather's or a
// reduce's leaves) has nothing to wait for but its left neighbour's 4-byte
// root message, and that neighbour posts it only when it reaches the same
// call. Waiting made back-to-back 8-byte broadcasts at 4 ranks cost a
// message latency each, where an MPI root runs ahead (issue 46: 13-43 µs
// against MPI's 1-2 µs). Such a rank now returns as soon as its sends are
// done and the check's receive is left here, unposted.
//
// How it still fails every rank: a rank that receives in its Plan waits for
// its check as before, so a disagreement next to it fails that very call on
// it, and its abort carries MismatchError to the others. Where only senders
// see the disagreement (every rank names itself root; or the one rank that
// names another root sits right of the real root), the check is settled
// later, on the same rank: at the start of its next collective on this
// Context, while that collective waits, and when the Context is destroyed.
// The verdict is the same MismatchError, in the check's own words ("rank 1:
// broadcast #0: peer rank 0 names root 0 but this rank names root 1"),
// raised by that later call, and the abort relays it to every rank. So a
// disagreement is never silent; it may surface one call late, on the ranks
// that only sent (docs/algorithms.md, "The root check").
//
// Nothing is posted for a deferred check: its message waits in the pair's
// unexpected queue until it is claimed (Pair::post_recv_if_arrived), so no
// request outlives a call or the Context. At most kCapacity checks wait; a
// rooted call that would exceed it first waits for the oldest (a root that
// ran kCapacity calls ahead of its neighbour waits for it, as before).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "algorithms/model/call.h"
#include "base/deadline.h"
#include "transport/transport.h"

namespace chorus::algorithms {

class Communicator;

class DeferredRootChecks {
 public:
  static constexpr size_t kCapacity = 64;

  DeferredRootChecks();
  ~DeferredRootChecks();
  DeferredRootChecks(const DeferredRootChecks&) = delete;
  DeferredRootChecks& operator=(const DeferredRootChecks&) = delete;

  bool empty() const { return waiting_.load(std::memory_order_acquire) == 0; }
  bool full() const { return waiting_.load(std::memory_order_acquire) >= kCapacity; }

  // Leaves the check of `call` (whose tag `tag` the check was sent with) to
  // be settled later. Requires !full() (settle(make_room) makes it so);
  // claims it at once if the neighbour's message is already here.
  void defer(const Communicator& communicator, const Call& call, transport::Tag tag, uint32_t sequence);

  enum class Wait {
    none,       // claims and verifies what has arrived; never blocks
    make_room,  // then, while full, waits for the oldest
    all,        // then waits for every one (the Context's end)
  };
  // Throws MismatchError for a neighbour that named another root, the
  // failure of a claimed receive, or TimeoutError past `deadline`; it
  // aborts the Mesh first, so the other ranks learn of it. Call it outside
  // the Mesh's polling scope unless `wait` is none.
  void settle(const Communicator& communicator, Deadline deadline, Wait wait);

 private:
  struct Entry;
  // Claims and verifies what it can, oldest first; under mutex_.
  void settle_arrived(const Communicator& communicator);
  [[noreturn]] void fail(const Communicator& communicator, std::exception_ptr error);

  std::mutex mutex_;
  transport::CompletionSignal signal_;  // the claimed receives'
  std::unique_ptr<Entry[]> entries_;    // a ring of kCapacity
  size_t oldest_ = 0;
  std::atomic<size_t> waiting_{0};
};

}  // namespace chorus::algorithms
