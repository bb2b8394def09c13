// The transport seam. Every transport (tcp now; ibverbs, cuda_ipc, shm later)
// implements Device and Pair; algorithms see nothing else of it.
//
// The caller owns each Request and keeps it alive until it completes or the
// Device is aborted. Posting is non-blocking; completion is reported by the
// Request's state and by the CompletionSignal the caller attached before
// posting, so one thread can wait for "any of my requests" without polling
// each one. The signal must outlive its requests: its destructor waits for a
// transport thread that is still inside a completion, which is what makes it
// safe to destroy a Request as soon as it is seen finished.
//
// Failure model: the first error on any Pair (peer closed, reset, hostile
// bytes, mismatched frame) aborts the whole Device. Every pending Request then
// fails with that error and every later post fails at once. A collective
// library cannot continue after losing a peer, and failing everything keeps a
// rank from waiting on a neighbour that is itself waiting on the dead peer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/link_model.h"

namespace chorus::transport {

// Messages match on (`group`, `value`) (per pair, per direction, FIFO among
// equal tags). `group` names the Context a message belongs to: a child made by
// Context::split shares its parent's pairs, and the group keeps their
// collectives apart even when both are numbered the same. `signature`
// describes the call that produced the message (collective, type, count...):
// a receive whose signature differs from the arriving frame's fails with
// MismatchError instead of landing bytes of the wrong call.
struct Tag {
  uint64_t value = 0;
  uint64_t signature = 0;
  uint64_t group = 0;
};

// Wakes one waiter when any of the requests attached to it completes.
class CompletionSignal {
 public:
  CompletionSignal() = default;
  CompletionSignal(const CompletionSignal&) = delete;
  CompletionSignal& operator=(const CompletionSignal&) = delete;
  ~CompletionSignal();
  uint64_t count() const { return count_.load(std::memory_order_acquire); }
  // Returns once count() != seen or the deadline passed; returns count().
  uint64_t wait_change(uint64_t seen, Deadline deadline);

 private:
  std::atomic<uint64_t> count_{0};
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable cv_;

  friend class Request;
  // Runs publish (which makes a request's new state visible) and bumps the
  // count under the mutex, so nothing touches the request after publish.
  template <class Publish>
  void notify(Publish&& publish);
};

class Request {
 public:
  enum class State : uint8_t { idle, pending, done, failed };

  State state() const { return state_.load(std::memory_order_acquire); }
  bool finished() const { State s = state(); return s == State::done || s == State::failed; }
  std::exception_ptr error() const { return error_; }  // valid once state() == failed
  // Required before the first post; the signal must outlive the request.
  void attach(CompletionSignal* signal) { signal_ = signal; }
  CompletionSignal* signal() const { return signal_; }

  // Transport side.
  void mark_pending() { error_ = nullptr; state_.store(State::pending, std::memory_order_release); }
  void complete();
  void fail(std::exception_ptr error);

  // Blocks until finished; throws the request's error, or TimeoutError
  // whose message is `what` ("rank 0: timed out after 5 s waiting for ...").
  void wait(Deadline deadline, const std::string& what);

 private:
  std::atomic<State> state_{State::idle};
  std::exception_ptr error_;
  CompletionSignal* signal_ = nullptr;
};

// One connected peer.
class Pair {
 public:
  virtual ~Pair() = default;
  virtual int peer_rank() const = 0;
  // Sends data (not copied: it must stay valid until the request finishes).
  virtual void post_send(Request& request, Tag tag, std::span<const std::byte> data) = 0;
  // Receives a message of exactly data.size() bytes straight into data.
  // A message of another length fails with MismatchError.
  virtual void post_recv(Request& request, Tag tag, std::span<std::byte> data) = 0;
};

// One per Context per transport: listens, owns the progress engine.
class Device {
 public:
  virtual ~Device() = default;
  virtual int rank() const = 0;
  // Opaque blob the bootstrap hands every other rank.
  virtual std::vector<std::byte> address() const = 0;
  // Builds the connection to one peer. Both sides call it; the transport
  // decides who dials. Throws IoError/TimeoutError naming the peer.
  // `stream` picks one of several independent connections to the same peer
  // (0..streams-1, the count the device was created with); each has its own
  // message order, so a large message striped over them moves in parallel.
  virtual std::unique_ptr<Pair> connect(int peer_rank, std::span<const std::byte> peer_address,
                                        Deadline deadline, int stream = 0) = 0;
  virtual LinkModel link_model() const = 0;
  // Fails every pending request with `reason`, tells connected peers why
  // (best effort) and fails every later post. Synchronous: once it returns the
  // transport touches no posted buffer again. Idempotent: the first reason wins.
  virtual void abort(std::exception_ptr reason) = 0;
  // The error that aborted the device, or null.
  virtual std::exception_ptr failure() const = 0;
  // Non-blocking: lands whatever has already arrived for this device's
  // pending receives on the calling thread, completing their requests there.
  // A waiter that calls it while it spins saves the hand-off from the
  // transport's thread. Returns whether any bytes were consumed. Safe from
  // any thread, concurrently with the transport's own progress and abort.
  // Never blocks or yields: when to give the CPU away is the waiter's policy.
  virtual bool progress() { return false; }
  // Bracket a stretch in which the calling thread keeps calling progress().
  // Meanwhile the transport's own thread leaves reading to the caller instead
  // of being woken for every arriving message: on a host with more ranks than
  // cores those wake-ups cost more than the messages (docs/latency.md).
  // end_polling() hands reading back, so call it before sleeping. Nested and
  // concurrent scopes are counted.
  virtual void begin_polling() {}
  virtual void end_polling() {}
};

// Holds Device::begin_polling() for its lifetime.
class PollingScope {
 public:
  explicit PollingScope(Device& device) : device_(device) { device_.begin_polling(); }
  ~PollingScope() { device_.end_polling(); }
  PollingScope(const PollingScope&) = delete;
  PollingScope& operator=(const PollingScope&) = delete;

 private:
  Device& device_;
};

}  // namespace chorus::transport
