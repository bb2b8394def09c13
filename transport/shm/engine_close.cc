// The shared-memory device's end: aborting (reports to every peer, the
// failure relayed once), the cleanup on the device's thread, and the
// orderly close.
#include "transport/shm/engine.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "base/error.h"
#include "transport/abort_report.h"

namespace chorus::transport::shm {

// ---------------------------------------------------------------- aborting

void Engine::abort(std::exception_ptr reason, LogLevel level, bool wait) {
  reason = abort_reason(rank(), std::move(reason));
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // record_failure_locked wakes connect()'s waiters.
    first = record_failure_locked(reason);
    if (first) {
      const AbortReport report = report_abort(reason);
      abort_message_ = encode_abort({report.error_class, report.blamed_rank, report.text});
      log_abort(rank(), "shm", reason, level);
    }
  }
  if (first) run_failure_callback(reason);
  if (!wait) {
    wake();  // the device's thread cleans up
    return;
  }
  // Any thread may clean up: the connections' locks wait out copies in progress.
  run_cleanup_if_needed();
}

void Engine::relay_instead(std::exception_ptr reason) {
  if (!reason) return;
  const AbortReport report = report_abort(reason);
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_ && !cleanup_started_)
    abort_message_ = encode_abort({report.error_class, report.blamed_rank, report.text});
}

void Engine::run_cleanup_if_needed() {
  std::exception_ptr error;
  std::vector<std::byte> message;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!failure_) return;
    if (cleanup_started_) {
      changed_.wait(lock, [&] { return cleanup_done_; });
      return;
    }
    cleanup_started_ = true;
    error = failure_;
    message = abort_message_;
    // A dialer whose handshake this rank admitted but never took up already
    // holds a connection: it reads the abort (after the handshake's reply, in
    // order) before the socket closes, as a taken-up connection's peer does,
    // instead of a bare end of stream. Non-blocking: one small message.
    for (const auto& [dialer, admitted] : admitted_)
      if (admitted.side.valid() && !message.empty()) send_side(admitted.side.get(), message);
    admitted_.clear();
  }
  for (Connection* connection : connections()) connection->fail_everything(error, message);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cleanup_done_ = true;
  }
  changed_.notify_all();
}

// ---------------------------------------------------------------- closing

void Engine::shutdown() {
  shutting_down_.store(true, std::memory_order_release);
  say_goodbye(*this, connections());
  loop_.stop();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Later posts through surviving Pair handles fail at once with this.
    if (!failure_) record_failure_locked(destroyed_error(rank()));
    cleanup_started_ = true;
    admitted_.clear();
  }
  for (Connection* connection : connections()) connection->fail_everything(failure(), {});
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cleanup_done_ = true;
  }
  changed_.notify_all();
  listener_.reset();
}

}  // namespace chorus::transport::shm
