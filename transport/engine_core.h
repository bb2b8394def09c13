// What every transport's Engine (the object that really is the device:
// transport/engine_device.h) keeps the same way, written once:
// - the facts a connection asks of it (CommonConnectionOwner): this rank,
//   how a call signature reads in an error, the unexpected-bytes bound,
//   the position a probe answer reports, the arrivals notifier;
// - the failure bookkeeping: the first reason (under the engine's lock),
//   the flag a post reads without it, and the callback the Device shell
//   installs to hear of it once, outside the engine's locks;
// - what every engine says when it fails or closes: the reason of an abort
//   given none, the log line of an abort, the errors of a device destroyed
//   (with requests pending, or later through a surviving Pair), the goodbye
//   of an orderly close, and the wait of the rank a peer dials.
// A transport's engine derives from EngineCore<its connection-owner
// interface> and adds what is its own: connecting, the wire, progress and
// how it cleans up after a failure.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/deadline.h"
#include "base/log.h"

#include "transport/device_options.h"
#include "transport/tag_matching.h"
#include "transport/transport.h"

namespace chorus::transport {

// What every connection may ask of the engine that owns it. A transport's
// own owner interface (tcp::ConnectionOwner, ...) extends it.
class CommonConnectionOwner {
 public:
  virtual int rank() const = 0;
  // A call signature in words, for MismatchError text.
  virtual std::string describe_signature(uint64_t signature) const = 0;
  // Bytes of messages nobody posted a receive for that one connection may buffer.
  virtual size_t max_unexpected_bytes() const = 0;
  // This rank's encoded position in `group`, for a probe's answer (0: none).
  virtual uint64_t position_in(uint64_t group) const = 0;
  // Told of every message buffered with no receive posted (Device::watch_arrivals).
  virtual ArrivalNotifier& arrivals() = 0;
  virtual bool failed() const = 0;
  virtual std::exception_ptr failure() const = 0;

  // The MismatchError for a message from `peer_rank` (`their_bytes` sent
  // with `theirs`) that is not what `receive` expects, both calls in words.
  std::exception_ptr mismatch_error(int peer_rank, const Tag& theirs, uint64_t their_bytes,
                                    const PostedReceive& receive) const;

 protected:
  ~CommonConnectionOwner() = default;
};

// "signature 0x…": the words for a signature when the Context gave none.
std::string plain_signature(uint64_t signature);

// What an abort reports: `reason`, or "rank N: aborted" where the caller gave none.
std::exception_ptr abort_reason(int rank, std::exception_ptr reason);
// "<transport>: transport aborted: <what>" at `level` (nothing below the log level).
void log_abort(int rank, std::string_view transport, const std::exception_ptr& reason, LogLevel level);
// Aborted: "rank N: the transport device was destroyed" (while `pending`
// requests were pending, where there were some).
std::exception_ptr destroyed_error(int rank, size_t pending = 0);

template <class Owner>
class EngineCore : public Owner {
 public:
  explicit EngineCore(const CommonDeviceOptions& options)
      : rank_(options.rank),
        describe_(options.describe_signature),
        max_unexpected_bytes_(options.max_unexpected_bytes),
        positions_(options.positions) {}

  int rank() const final { return rank_; }
  std::string describe_signature(uint64_t signature) const final {
    return describe_ ? describe_(signature) : plain_signature(signature);
  }
  size_t max_unexpected_bytes() const final { return max_unexpected_bytes_; }
  uint64_t position_in(uint64_t group) const final { return positions_ ? positions_->read(group) : 0; }
  ArrivalNotifier& arrivals() final { return arrivals_; }
  bool failed() const final { return failed_.load(std::memory_order_acquire); }
  std::exception_ptr failure() const final {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }
  // Runs `callback` once, outside the engine's locks, when it first fails;
  // null stops it (and waits for a call in progress).
  void set_failure_callback(std::function<void(std::exception_ptr)> callback) {
    std::lock_guard<std::mutex> lock(failure_callback_mutex_);
    failure_callback_ = std::move(callback);
  }

 protected:
  ~EngineCore() = default;

  // The orderly close's first step (tcp, shm): with requests still pending
  // on `connections` the device aborts, naming how many (`engine`'s abort:
  // the peers hear why); otherwise each connection says goodbye. Returns
  // whether they did. Nothing when the device failed already.
  template <class Engine, class Connection>
  bool say_goodbye(Engine& engine, const std::vector<Connection*>& connections) {
    if (failed()) return false;
    size_t pending = 0;
    for (Connection* connection : connections) pending += connection->pending_requests();
    if (pending > 0) {
      engine.abort(destroyed_error(rank_, pending), LogLevel::warn);
      return false;
    }
    for (Connection* connection : connections) connection->send_goodbye();
    return true;
  }

  // Under `lock` (on mutex_): the rank a peer dials waits until `admitted()`
  // says its dialer arrived, the device fails (rethrown) or the deadline
  // passes, in slices a far deadline cannot overflow. Returns how long it
  // waited, for the timeout's message.
  template <class Admitted>
  Clock::duration wait_for_dialer_locked(std::unique_lock<std::mutex>& lock, Deadline deadline, Admitted admitted) {
    const auto started = Clock::now();
    while (!failure_ && !admitted() && !deadline.expired())
      changed_.wait_for(lock, std::min(deadline.remaining() + std::chrono::milliseconds(1),
                                       std::chrono::milliseconds(60'000)));
    if (failure_) std::rethrow_exception(failure_);
    return Clock::now() - started;
  }

  // Under mutex_: makes `reason` the device's failure unless there is one
  // already, and wakes whoever waits on changed_. Returns whether it did:
  // the first failure is the one every later post reports.
  bool record_failure_locked(std::exception_ptr reason) {
    if (failure_) return false;
    failure_ = std::move(reason);
    failed_.store(true, std::memory_order_release);
    changed_.notify_all();
    return true;
  }
  // Without mutex_, once after record_failure_locked said it was first.
  void run_failure_callback(const std::exception_ptr& reason) {
    std::lock_guard<std::mutex> lock(failure_callback_mutex_);
    if (failure_callback_) failure_callback_(reason);
  }

  // The engine's lock: the failure, and whatever the transport guards with it.
  mutable std::mutex mutex_;
  // Notified on a failure, and on whatever else the transport waits for under mutex_.
  std::condition_variable changed_;
  std::exception_ptr failure_;  // under mutex_; written by record_failure_locked only

 private:
  const int rank_;
  const std::function<std::string(uint64_t)> describe_;
  const size_t max_unexpected_bytes_;
  const std::shared_ptr<const PositionTable> positions_;
  std::atomic<bool> failed_{false};
  ArrivalNotifier arrivals_;
  std::mutex failure_callback_mutex_;
  std::function<void(std::exception_ptr)> failure_callback_;
};

}  // namespace chorus::transport
