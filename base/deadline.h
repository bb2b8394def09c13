// A point in time after which a blocking call gives up with TimeoutError.
#pragma once

#include <chrono>

namespace chorus {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(std::chrono::milliseconds timeout) {
    Deadline deadline(Clock::now() + timeout);
    deadline.timeout_ = timeout;
    return deadline;
  }
  // `timeout` after the first time anyone asks (at, expired, remaining), not
  // after now: a collective that never has to wait (the board's small calls,
  // algorithms/shared_memory/board.h) reads no clock for it, which is a tenth of its cost.
  // Each copy made before that first question keeps its own start; the
  // collectives ask as soon as they begin to wait.
  static Deadline after_first_use(std::chrono::milliseconds timeout) {
    Deadline deadline(Clock::time_point::max());
    deadline.pending_ = true;
    deadline.timeout_ = timeout;
    return deadline;
  }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const {
    if (pending_) {
      at_ = Clock::now() + timeout_;
      pending_ = false;
    }
    return at_;
  }
  bool expired() const { return Clock::now() >= at(); }
  // The timeout it was made with (after, after_first_use), for messages: a
  // call that began waiting a moment after its deadline was set would
  // otherwise report 1999 ms for a 2 s timeout. Zero for never() and a
  // deadline made from a time point.
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::chrono::milliseconds remaining() const {
    const Clock::time_point end = at();
    auto now = Clock::now();
    if (now >= end) return std::chrono::milliseconds(0);
    return std::chrono::duration_cast<std::chrono::milliseconds>(end - now);
  }

 private:
  mutable Clock::time_point at_;
  mutable bool pending_ = false;
  std::chrono::milliseconds timeout_{};
};

}  // namespace chorus
