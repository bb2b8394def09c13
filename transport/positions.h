// Where a rank is in each of its Contexts: the sequence number of the last
// collective it started in each group, and whether it is still running it.
// The executor writes it (two atomic stores per collective); a rank's
// transports read it when they answer a peer's liveness probe, which asks
// for one group. So a rank stalled in collective #12 can tell the peers that
// have not called #12 yet (still in #11, or idle since #9) from those stuck
// inside it with it, and name them (docs/failures.md), whatever its peers'
// applications are doing: their transport threads answer.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

namespace chorus::transport {

struct Position {
  bool known = false;    // the rank has started a collective in this group
  bool running = false;  // and is inside `sequence` now
  uint32_t sequence = 0;
};

// 64 bits on the wire: bit 63 known, bit 32 running, bits 0-31 the sequence.
// 0 means "nothing known" (an old peer, a group it has no Context of, or a
// rank that has not called any collective there yet). Inline: every
// collective writes its position twice.
inline constexpr uint64_t kPositionKnownBit = uint64_t{1} << 63;
inline constexpr uint64_t kPositionRunningBit = uint64_t{1} << 32;
constexpr uint64_t encode_position(Position position) {
  if (!position.known) return 0;
  return kPositionKnownBit | (position.running ? kPositionRunningBit : 0) | position.sequence;
}
Position decode_position(uint64_t code);

// "in #12", "finished #11 and called nothing since", "has called nothing".
std::string describe_position(Position position);

// The answers a connection got to its liveness probes (what its
// transport's progress thread records, and Pair::liveness_answered and
// Pair::answered_position read), kept the same way by every transport.
class ProbeAnswers {
 public:
  // The position first: whoever sees the probe answered may read it.
  void record(uint64_t probe, uint64_t group, uint64_t position);
  // Whether the answer to `probe` or a later probe came (probes are numbered upwards).
  bool answered(uint64_t probe) const { return answered_.load(std::memory_order_acquire) >= probe; }
  // The position reported for `group` by the answer to `probe` or a later
  // probe about it; nullopt when the newest answer is older or about
  // another group.
  std::optional<uint64_t> position(uint64_t probe, uint64_t group) const;

 private:
  std::atomic<uint64_t> answered_{0};
  mutable std::mutex mutex_;
  uint64_t probe_ = 0;
  uint64_t group_ = 0;
  uint64_t position_ = 0;
};

class PositionTable {
 public:
  // The slot of a group, made on first use; its address never changes, so a
  // Communicator keeps a pointer and writes it without a lock.
  std::atomic<uint64_t>& slot(uint64_t group);
  // The encoded position of a group (0 when none), for a probe's answer.
  uint64_t read(uint64_t group) const;

 private:
  struct Entry {
    uint64_t group;
    std::atomic<uint64_t> code{0};
  };
  mutable std::mutex mutex_;
  std::deque<Entry> entries_;  // a deque: entries never move
};

}  // namespace chorus::transport
