// A point in time after which a blocking call gives up with TimeoutError.
#pragma once

#include <chrono>

namespace chorus {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(std::chrono::milliseconds timeout) { return Deadline(Clock::now() + timeout); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const { return at_; }
  bool expired() const { return Clock::now() >= at_; }
  std::chrono::milliseconds remaining() const {
    auto now = Clock::now();
    if (now >= at_) return std::chrono::milliseconds(0);
    return std::chrono::duration_cast<std::chrono::milliseconds>(at_ - now);
  }

 private:
  Clock::time_point at_;
};

}  // namespace chorus
