#include "transport/positions.h"

#include "base/log.h"

namespace chorus::transport {

namespace {
constexpr uint64_t kKnownBit = kPositionKnownBit;
constexpr uint64_t kRunningBit = kPositionRunningBit;
}  // namespace

Position decode_position(uint64_t code) {
  Position position;
  position.known = (code & kKnownBit) != 0;
  if (!position.known) return position;
  position.running = (code & kRunningBit) != 0;
  position.sequence = static_cast<uint32_t>(code & 0xffffffffu);
  return position;
}

std::string describe_position(Position position) {
  if (!position.known) return "has called no collective on this context";
  if (position.running) return cat("is in #", position.sequence);
  return cat("finished #", position.sequence, " and has called nothing since");
}

void ProbeAnswers::record(uint64_t probe, uint64_t group, uint64_t position) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (probe >= probe_) {  // answers may overtake each other across threads
      probe_ = probe;
      group_ = group;
      position_ = position;
    }
  }
  uint64_t known = answered_.load(std::memory_order_relaxed);
  while (probe > known && !answered_.compare_exchange_weak(known, probe, std::memory_order_acq_rel)) {
  }
}

std::optional<uint64_t> ProbeAnswers::position(uint64_t probe, uint64_t group) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (probe_ == 0 || probe_ < probe || group_ != group) return std::nullopt;
  return position_;
}

std::atomic<uint64_t>& PositionTable::slot(uint64_t group) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Entry& entry : entries_)
    if (entry.group == group) return entry.code;
  Entry& added = entries_.emplace_back();
  added.group = group;
  return added.code;
}

uint64_t PositionTable::read(uint64_t group) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& entry : entries_)
    if (entry.group == group) return entry.code.load(std::memory_order_relaxed);
  return 0;
}

}  // namespace chorus::transport
