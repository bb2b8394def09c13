// Rooted collectives that send no root check of their own, on the
// application's Contexts of up to kMaxChainedRanks ranks: broadcast, gather,
// scatter and their v variants (a reduce keeps its message, root_check.h).
//
// Why: the root check's 4-byte message to a neighbour, beside the call's
// data, was most of a small broadcast's time across hosts where a message
// costs a wake-up (2 hosts x 2 ranks in network namespaces: 32-55 µs with
// it, 18-25 without; Open MPI, which checks nothing, 17-26; benchmarks/
// README.md). Where a Context's roots fit the signature's root byte whole,
// three things find every disagreement instead, none of them on the
// call's path when the ranks agree:
//
// 1. The data itself. Every frame carries the sender's root exactly (the
//    signature), and a receive fails with MismatchError on a frame of
//    another root. So no rank ever takes data from a rank that named
//    another root: what a rank returns came, hop by hop, from the root it
//    named.
// 2. The next call. A rank whose call ends without any frame of another
//    root (every rank named itself: each broadcast only sent) carries the
//    root it named into its next collective's signature (Call::
//    previous_root), which the next call's frames and the board's slots
//    compare: a disagreement fails the next call, on every rank, in the
//    words of both roots. A Context whose last rooted call is followed by
//    no call that carries it (its end, or only reduces) checks it as it
//    ends: each rank sends its root to its right neighbour and waits for
//    its left neighbour's, as the root checks left to the end did before.
//    Where the next call does not carry it either (every rank names
//    itself root of broadcast after broadcast: nobody ever receives), the
//    frames do: each root's frames wait, unclaimed, at ranks that ran the
//    call as roots themselves. Every kPollEveryRecords covered calls a rank
//    looks at what waits unclaimed from its left neighbour and, in turn,
//    one other member (Pair::find_unclaimed): a rooted call's frame of a
//    call this rank has finished, which nobody will take (every frame a
//    call expects is taken before it ends), fails it with MismatchError,
//    in the root check's words where this rank remembers naming another
//    root in that call, and the abort fails every rank. Where two ranks'
//    runs of such calls never overlap and neither sends to the other, it
//    is found as item 2 says above.
// 3. A late check, where a disagreement makes a call wait: the ranks'
//    trees differ, and a rank waits for a frame that nobody sends (every
//    rank of a gather named itself and only receives). A rooted call that
//    has waited kTellAfter sends its root to its right neighbour (16
//    bytes, once). Every rank claims its left neighbour's as it waits in
//    any later call (messages or the board) and as each rooted call
//    starts: another root fails it with MismatchError (the root check's
//    words, root_check.h), the abort relays that to every rank, and an
//    equal root is passed on to the right, once per call, so the check
//    goes round the ring through ranks that had finished the call. A
//    waiting rank wakes every kPollEvery to look.
//
// What it costs where the ranks agree: nothing on the wire unless a rooted
// call waits past kTellAfter (then 16 bytes a rank, once); a look at one
// pair (the left neighbour's) as each rooted call starts and while a call
// sleeps. What changes where they disagree: a disagreement no rank waits
// on surfaces in the next call (as one that only senders saw did before:
// deferred_root_checks.h), never later; one that makes a rank wait
// surfaces within kTellAfter plus a poll, on every rank that goes on
// calling (a rank off in its own work for longer learns it from its next
// call, through the abort).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "algorithms/model/call.h"
#include "base/deadline.h"
#include "transport/transport.h"

namespace chorus::algorithms {

class Communicator;

class LateRootChecks {
 public:
  // A rooted call that has waited this long tells its right neighbour its root.
  static constexpr std::chrono::milliseconds kTellAfter{10};
  // How often a sleeping call wakes to look for its left neighbour's.
  static constexpr std::chrono::milliseconds kPollEvery{5};
  // Rooted calls remembered, to compare a late neighbour's root with.
  static constexpr size_t kHistory = 64;
  // A rank that never waits still claims its neighbour's words, and looks
  // for frames that name another root (item 2), this often.
  static constexpr uint64_t kPollEveryRecords = 16;
  // A member's oldest messages looked at for a frame nobody will take.
  static constexpr size_t kStrayFramesLooked = 16;

  LateRootChecks();
  ~LateRootChecks();
  LateRootChecks(const LateRootChecks&) = delete;
  LateRootChecks& operator=(const LateRootChecks&) = delete;

  // Whether `call` on `communicator` sends no root check of its own: a
  // rooted call but a reduce, on a Communicator with late checks, of 2 to
  // kMaxChainedRanks ranks.
  static bool covers(const Communicator& communicator, const Call& call);

  // As a covered call starts on messages (the executor): remembers its
  // root, for the left neighbour's word on it. (The board checks its own
  // calls' roots, and a call the ranks run one on the board and one on
  // messages fails there.)
  void record(const Communicator& communicator, const Call& call, uint32_t sequence);
  // Whether any covered call ran: only then is there anything to look for.
  bool active() const;
  // Claims and verifies what the left neighbour sent, passing an equal
  // root on. Never waits. Throws MismatchError (the Mesh aborted first).
  void poll(const Communicator& communicator);
  // The covered call `sequence` has waited kTellAfter: its root goes to
  // the right neighbour, unless it went already.
  void tell(const Communicator& communicator, uint32_t sequence);
  // As the Context ends, when no later call carried the last covered
  // call's root (item 2 above): tells the right neighbour and waits up to
  // `deadline` for the left neighbour's. Throws as poll does, or
  // TimeoutError naming the neighbour.
  void settle_last(const Communicator& communicator, uint32_t sequence, Deadline deadline);
  // A covered call that runs as calls of helper groups of its own (the
  // host boards' broadcast, host_boards.h), which have no late checks:
  // while a Delegated lives on a thread, the waits of those helper calls
  // on it (the Executor's, the board's) send no root check message of
  // their own, look for the Context's neighbour words, and past kTellAfter
  // tell the covered call's root, as that call's own waits would. The
  // covered call records itself (record) before its phases start.
  struct Delegation {
    LateRootChecks* checks = nullptr;
    const Communicator* context = nullptr;  // the covered call's own
    uint32_t sequence = 0;                  // the covered call's number
  };
  class Delegated {
   public:
    explicit Delegated(const Delegation& delegation);
    ~Delegated();
    Delegated(const Delegated&) = delete;
    Delegated& operator=(const Delegated&) = delete;

   private:
    const Delegation* outer_;
  };
  // This thread's, while a Delegated lives; null otherwise.
  static const Delegation* delegated();

  // As the Context ends, after settle_last if it ran: waits up to
  // `deadline` for this rank's sends (and a claimed receive) to finish, since
  // their memory is this object's; past it, aborts the Mesh, which fails them.
  void settle_sends(const Communicator& communicator, Deadline deadline);

 private:
  struct Entry {
    uint32_t sequence = 0;
    int root = 0;
    Collective collective = Collective::broadcast;
    bool variable = false;  // gatherv, scatterv
    bool used = false;
    bool told = false;       // this rank sent its root for it
    bool confirmed = false;  // the left neighbour's arrived, and agreed
  };
  // The 16 bytes on the wire: sequence, root (little-endian 32 bits each), 8 zero.
  using Wire = std::array<std::byte, 16>;
  struct Outgoing {
    transport::Request request;
    Wire bytes{};
  };

  static std::string name_of(const Entry& entry);  // "broadcast", "gatherv"
  Entry* find(uint32_t sequence);
  // The recorded call a collective frame's tag belongs to (its 31-bit sequence), or null.
  const Entry* find_tagged(const transport::Tag& tag) const;
  // Whether a collective frame's tag is of a call before the newest
  // recorded (the one starting as record() looks).
  bool finished(const transport::Tag& tag) const;
  void tell_locked(const Communicator& communicator, Entry& entry);
  void poll_locked(const Communicator& communicator);
  // Compares the left neighbour's root for `sequence` with this rank's.
  void judge(const Communicator& communicator, Entry& entry, int their_root);
  void reap_sends();
  // Item 2's look at frames nobody took, from the left neighbour and, in
  // turn, one other member.
  void look_for_stray_frames(const Communicator& communicator);
  void look_at_unclaimed(const Communicator& communicator, int member);
  [[noreturn]] void fail(const Communicator& communicator, std::exception_ptr error);

  mutable std::mutex mutex_;
  transport::CompletionSignal signal_;
  std::array<Entry, kHistory> history_;
  size_t next_ = 0;
  uint64_t records_ = 0;
  uint64_t stray_looks_ = 0;
  std::atomic<bool> any_{false};
  std::optional<uint32_t> newest_;  // the newest sequence recorded
  // The left neighbour's message being claimed, and those about calls this
  // rank has not reached yet (kept until it does).
  transport::Request receive_;
  bool receiving_ = false;
  Wire incoming_{};
  std::deque<std::pair<uint32_t, int>> early_;
  std::deque<std::unique_ptr<Outgoing>> sends_;
};

}  // namespace chorus::algorithms
