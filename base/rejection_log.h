// Rejected connections, logged without letting a stranger flood the log:
// anyone may reach a listener (a rank's, a store's), and a warning per
// garbage connection would turn 10,000 of them into 10,000 lines. The first
// rejection of a source (a dialer's address, a peer's pid) in an interval
// gets a line of its own, at most kMaxLinesPerInterval lines an interval in
// all; the others are counted, and summary() turns the count into one line
// per interval: "dropped N connections from M sources in the last 10 s".
// Every rejection is still logged at debug by its caller. Not thread-safe:
// one listener thread (or the caller's lock) owns it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace chorus {

class RejectionLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxLinesPerInterval = 20;

  explicit RejectionLog(Clock::duration interval = std::chrono::seconds(10)) : interval_(interval) {}

  // Whether a rejection of `source` at `now` gets a line of its own.
  bool admit(const std::string& source, Clock::time_point now = Clock::now());

  // The line for the rejections admit() did not give one, once an interval
  // has passed since the first of them; nothing when there is none or the
  // interval is not over. Call it after admit() and from a timer.
  std::optional<std::string> summary(Clock::time_point now = Clock::now());
  // When summary() will have a line (time_point::max() if never).
  Clock::time_point summary_due() const;

  // Rejections counted without a line of their own, over the log's life.
  uint64_t unlogged() const { return unlogged_; }

 private:
  Clock::duration interval_;
  std::unordered_map<std::string, Clock::time_point> logged_at_;  // each source's last line
  Clock::time_point interval_started_{};
  size_t lines_this_interval_ = 0;
  // The rejections awaiting a summary line.
  Clock::time_point counting_since_{};
  uint64_t counted_ = 0;
  std::unordered_set<std::string> counted_sources_;
  uint64_t unlogged_ = 0;
};

}  // namespace chorus
