// Rejected connections, logged without letting a stranger flood the log:
// anyone may reach a listener, and a warning per garbage connection would
// turn 10,000 of them into 10,000 lines on every rank. The first rejection
// of a source (a peer's pid, a peer's address) in an interval is a line;
// later ones are counted and the count rides on the source's next line. At
// most kMaxLinesPerInterval lines an interval in all, so strangers spread
// over many sources are bounded too; what is not logged is counted under
// "other sources". Only the listener's thread calls it (not thread-safe).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace chorus::transport {

class RejectionLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxLinesPerInterval = 20;

  explicit RejectionLog(Clock::duration interval = std::chrono::seconds(10)) : interval_(interval) {}

  // Whether a rejection of `source` at `now` gets a line; if so, the text
  // to append to it (empty, or how many rejections went unlogged since).
  std::optional<std::string> admit(const std::string& source, Clock::time_point now = Clock::now());

  // Rejections counted without a line, over the log's life.
  uint64_t unlogged() const { return unlogged_; }

 private:
  struct Source {
    Clock::time_point logged_at;
    uint64_t since_logged = 0;
  };

  Clock::duration interval_;
  std::unordered_map<std::string, Source> sources_;
  Clock::time_point interval_started_{};
  size_t lines_this_interval_ = 0;
  uint64_t others_since_logged_ = 0;  // rejections past the line budget, any source
  uint64_t unlogged_ = 0;
};

}  // namespace chorus::transport
