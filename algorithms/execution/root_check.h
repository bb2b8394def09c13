// The root check of a rooted collective (broadcast, reduce, gather, scatter
// and their v variants): beside the Plan's own steps, every rank sends the
// root it names to its right neighbour and receives its left neighbour's.
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
// What it costs: a rank that only sent (a broadcast's root, a gather's
// leaves) now waits for a neighbour to start the same call. It must: where
// every rank names itself root, each fails in that very call only if it
// hears from a peer in it. So back-to-back small rooted calls, whose senders
// used to run ahead, move at about one message latency per call (8-byte
// broadcasts at 2 ranks over shm on a 2-core VM: 1-3 µs each before, 7-13
// µs after); a rooted call followed by any other collective, as in a
// training step, costs nothing measurable (the other call waits anyway).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

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
  // Once the receive is done: throws MismatchError naming this rank, the
  // left neighbour and both roots if the neighbour names another root.
  void verify(const Call& call, uint32_t sequence) const;

 private:
  // Little-endian 32 bits: exact for every root a Context can have, the same
  // bytes whatever the hosts' byte order.
  std::array<std::byte, 4> mine_{};
  std::array<std::byte, 4> theirs_{};
};

}  // namespace chorus::algorithms
