// The TCP device's end: aborting (abort frames to every peer, the failure
// relayed once), the cleanup on the progress thread, and the orderly close
// with goodbye frames.
#include "transport/tcp/engine.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "transport/tcp/abort_frame.h"

namespace chorus::transport::tcp {
namespace {

// How long an abort waits for a full socket to take its abort frames.
constexpr auto kAbortFrameBudget = std::chrono::milliseconds(250);
// How long a closing device waits for its goodbye frames to leave.
constexpr auto kGoodbyeBudget = std::chrono::seconds(1);
// How long it then waits for its peers' kernels to acknowledge every byte
// it wrote (Connection::undelivered_bytes): a peer still receiving this
// rank's last message takes it within this. A peer that takes nothing for
// kDeliveryStall (stopped, or not reading what it was sent) is not waited
// for further.
constexpr auto kDeliveryBudget = std::chrono::seconds(2);
constexpr auto kDeliveryStall = std::chrono::milliseconds(500);
// The same wait once the device has failed. What is then in flight is a dead
// collective's bytes and the abort frame: a healthy peer takes them within
// milliseconds, and one behind a link that crawls (shaped to a trickle,
// still acknowledging a segment now and then) would not get them within the
// full budget either, so waiting longer only delays this rank's exit.
constexpr auto kDeliveryBudgetAfterFailure = std::chrono::milliseconds(500);

}  // namespace

// ---------------------------------------------------------------- aborting

void Engine::abort(std::exception_ptr reason, LogLevel level, bool wait) {
  reason = abort_reason(rank(), std::move(reason));
  std::unique_lock<std::mutex> lock(mutex_);
  // record_failure_locked wakes connect()'s waiters.
  if (record_failure_locked(reason)) {
    abort_frame_ = encode_abort_frame(reason);
    log_abort(rank(), "tcp", reason, level);
    lock.unlock();
    run_failure_callback(reason);
    lock.lock();
  }
  if (cleanup_done_) return;
  // The progress thread cleans up itself, so it is never inside a read into a
  // buffer we are about to declare free; others hand the job to it and wait.
  bool on_progress_thread = loop_.on_thread();
  bool do_it_here = on_progress_thread || !thread_running_;
  lock.unlock();
  if (do_it_here) run_cleanup_if_needed();
  else wake();
  if (on_progress_thread || !wait) return;
  lock.lock();
  while (!cleanup_done_) {
    if (!thread_running_ && !cleanup_started_) {
      lock.unlock();
      run_cleanup_if_needed();
      lock.lock();
      continue;
    }
    changed_.wait(lock);
  }
}

void Engine::relay_instead(std::exception_ptr reason) {
  if (!reason) return;
  std::vector<std::byte> frame = encode_abort_frame(reason);
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_ && !cleanup_started_) abort_frame_ = std::move(frame);
}

void Engine::run_cleanup_if_needed() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_ || cleanup_started_) return;
    cleanup_started_ = true;
  }
  cleanup();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cleanup_done_ = true;
  }
  changed_.notify_all();
}

void Engine::tell_admitted_dialer(AdmittedSocket& admitted, std::span<const std::byte> frame) {
  if (frame.empty() || !admitted.fd.valid()) return;
  if (admitted.tls) {
    if (admitted.tls->write(frame.data(), frame.size()) > 0) admitted.tls->flush();
    return;
  }
  [[maybe_unused]] const ssize_t sent =
      ::send(admitted.fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Engine::cleanup() {
  std::vector<Connection*> connections;
  std::exception_ptr error;
  std::vector<std::byte> frame;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& connection : connections_) connections.push_back(connection.get());
    error = failure_;
    frame = abort_frame_;
    // A dialer whose handshake this rank admitted but never took up already
    // holds a connection and reads frames on it: it reads the abort (after
    // the handshake's reply, at a frame boundary) before the close, as a
    // taken-up connection's peer does, instead of a bare end of stream.
    // One small non-blocking write each; a full socket keeps the bare close.
    for (auto& [dialer, admitted] : admitted_) tell_admitted_dialer(admitted, frame);
    admitted_.clear();
  }
  auto give_up = Clock::now() + kAbortFrameBudget;
  for (Connection* connection : connections) {
    stop_watching(*connection);
    connection->fail_everything(error, frame, give_up);
  }
  for (auto& [id, incoming] : handshakes_) loop_.unwatch(incoming->fd());
  handshakes_.clear();
}

// ---------------------------------------------------------------- closing

void Engine::shutdown() {
  shutting_down_.store(true, std::memory_order_release);
  std::vector<Connection*> connections;
  const bool failed_before = failed();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& connection : connections_) connections.push_back(connection.get());
  }
  if (say_goodbye(*this, connections)) {
    auto give_up = Clock::now() + kGoodbyeBudget;
    auto all_sent = [&] {
      return std::all_of(connections.begin(), connections.end(), [](Connection* c) { return c->send_queue_empty(); });
    };
    while (!all_sent() && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  loop_.stop();
  std::exception_ptr destroyed = destroyed_error(rank());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Later posts through surviving Pair handles fail at once with this.
    record_failure_locked(destroyed);
    cleanup_started_ = cleanup_done_ = true;
    admitted_.clear();
  }
  for (Connection* connection : connections) connection->fail_everything(destroyed, {}, Clock::now());
  // Half-closed now (the FIN follows the data): the bytes already written
  // still travel, and the sockets close once the peers hold them. The
  // connections are watched together, so one stalled peer does not spend
  // the others' time.
  struct Draining {
    Connection* connection;
    size_t undelivered;
    Clock::time_point moved;
  };
  const auto started = Clock::now();
  const auto give_up = started + (failed_before ? kDeliveryBudgetAfterFailure : kDeliveryBudget);
  std::vector<Draining> draining;
  for (Connection* connection : connections) draining.push_back({connection, connection->undelivered_bytes(), started});
  while (!draining.empty()) {
    const auto now = Clock::now();
    std::erase_if(draining, [&](Draining& entry) {
      const size_t undelivered = entry.connection->undelivered_bytes();
      if (undelivered < entry.undelivered) entry.moved = now;
      entry.undelivered = undelivered;
      if (undelivered > 0 && now < give_up && now - entry.moved < kDeliveryStall) return false;
      entry.connection->close_socket();
      return true;
    });
    if (!draining.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  handshakes_.clear();
  listener_.reset();
}

}  // namespace chorus::transport::tcp
