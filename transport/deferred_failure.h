// A failure met by a thread that holds a lock the device's abort must take
// (a reader landing bytes in user memory, which abort waits out): recorded
// here, and reported by whoever lets go of that lock. The first failure
// recorded is the one reported; later ones follow from it.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

#include "base/log.h"

namespace chorus::transport {

class DeferredFailure {
 public:
  void record(std::exception_ptr reason, LogLevel level) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reason_) return;
    reason_ = std::move(reason);
    level_ = level;
    pending_.store(true, std::memory_order_release);
  }
  // Aborts `owner` (anything with abort(reason, LogLevel)) with the recorded
  // failure, if there is one, and forgets it. Call without the lock held.
  template <class Owner>
  void report_to(Owner& owner) {
    if (!pending_.load(std::memory_order_acquire)) return;
    std::exception_ptr reason;
    LogLevel level;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reason = std::exchange(reason_, nullptr);
      level = level_;
      pending_.store(false, std::memory_order_relaxed);
    }
    if (reason) owner.abort(reason, level);
  }

 private:
  std::mutex mutex_;
  std::atomic<bool> pending_{false};
  std::exception_ptr reason_;
  LogLevel level_ = LogLevel::warn;
};

}  // namespace chorus::transport
