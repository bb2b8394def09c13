// The root check of a rooted collective (broadcast, reduce, gather, scatter
// and their v variants): beside the Plan's own steps, every rank sends the
// root it names to its right neighbour and receives its left neighbour's.
//
// Where it runs: a reduce, every rooted call of a helper group, and every
// rooted call of a Context of more than kMaxChainedRanks ranks. The other
// rooted calls of an application's Context send no message of their own:
// the signature holds their root whole, and late_root_checks.h says what
// finds a disagreement there instead.
//
// Why a message of its own: the call signature in every frame holds only the
// root's low byte, and some disagreements send no frame that a receive would
// check at all: the root of a broadcast receives nothing (it would return
// with its own data, raising nothing), and a gather whose ranks all name
// themselves root leaves every rank waiting for blocks nobody sends (a
// timeout, not a mismatch). With the check every rank of the call receives
// one message naming a neighbour's exact root. Around the ring the root
// named must change somewhere if any two ranks disagree, so at least one
// rank sees a neighbour that disagrees; it fails with MismatchError and its
// abort carries that class to the others (transport/abort_report.h).
//
// Executor-side (executor.cc), not Plan steps: the same for every algorithm
// and transport, no Plan builder or simulator knows of it, and cached Plans
// are unchanged. Nothing is allocated: one 4-byte message each way per
// rooted call, travelling in parallel with the Plan.
//
// What it costs: a rank that only sends (a broadcast's root, a gather's
// leaves) would wait for a neighbour to start the same call, holding
// back-to-back small rooted calls to a message latency each. On an
// application's Context it does not: it posts its send and leaves the
// receive to the Context's deferred checks (deferred_root_checks.h), which
// settle it in a later call or as the Context ends. A rank that receives in
// its Plan waits for its check as before (it waits for data anyway).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "algorithms/model/call.h"
#include "algorithms/execution/communicator.h"
#include "transport/transport.h"

namespace chorus::algorithms {

// The slot of the root check's messages: the low 32 bits of their tag. No
// Plan uses it (a composed Plan's phases stay below their slot_limit,
// itself at most this value).
inline constexpr uint32_t kRootCheckSlot = std::numeric_limits<uint32_t>::max();

class RootCheck {
 public:
  // Whether `call` has one: a rooted collective on more than one rank.
  static bool needed(const Call& call);
  // The two neighbours: this rank sends to right and receives from left.
  static int right(const Call& call) { return (call.rank + 1) % call.size; }
  static int left(const Call& call) { return (call.rank + call.size - 1) % call.size; }

  // Posts both messages on the first stream of each neighbour's Pair. The
  // caller posts them before any step of the Plan, so on each pair they
  // travel ahead of the Plan's data: a frame the peer has no receive for
  // (it names another root) cannot hold them up. `tag` carries the call's
  // sequence and group; its slot and signature are set here.
  void post(const Communicator& communicator, const Call& call, transport::Tag tag, transport::Request& send,
            transport::Request& recv);
  // The send alone, for a rank that leaves its receive to the deferred
  // checks (deferred_root_checks.h).
  void post_send(const Communicator& communicator, const Call& call, transport::Tag tag, transport::Request& send);
  // Once the receive is done: throws MismatchError naming this rank, the
  // left neighbour and both roots if the neighbour names another root.
  void verify(const Call& call, uint32_t sequence) const;

  // The tag both messages travel with: `tag` (the call's sequence and
  // group) with the check's slot and signature.
  static transport::Tag check_tag(const Call& call, transport::Tag tag);
  // verify()'s verdict for bytes received elsewhere: `name` is the call's
  // ("broadcast", "gatherv").
  static void verify_bytes(std::string_view name, int rank, int left, int root,
                           const std::array<std::byte, 4>& theirs, uint32_t sequence);
  static std::string name_of(const Call& call);

 private:
  // Little-endian 32 bits: exact for every root a Context can have, the same
  // bytes whatever the hosts' byte order.
  std::array<std::byte, 4> mine_{};
  std::array<std::byte, 4> theirs_{};
};

}  // namespace chorus::algorithms
