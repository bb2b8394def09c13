// One peer connection's end: failing every request on an abort, goodbye
// and liveness-probe control frames, and closing the socket.
#include "transport/tcp/connection.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <string_view>

#include "base/error.h"
#include "transport/abort_report.h"
#include "transport/peer_errors.h"
#include "transport/tcp/io_limits.h"

namespace chorus::transport::tcp {

// ---------------------------------------------------------------- closing

void Connection::fail_everything(std::exception_ptr error, std::span<const std::byte> abort_frame,
                                 Clock::time_point give_up) {
  std::vector<Request*> doomed;
  bool send_abort = false;
  // Stops a reader at its next read first: with TLS a reader keeps going
  // while records are buffered, which on a full stream can be the whole
  // message (an abort then waited for a 256 MiB transfer to finish).
  reading_.store(false, std::memory_order_relaxed);
  {
    // Waits out a caller that is reading into a posted buffer right now.
    std::lock_guard<std::mutex> reader(reader_);
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    failed_ = true;
    reading_.store(false, std::memory_order_relaxed);
    // An abort frame may only start at a frame boundary, or the peer would
    // read it as the rest of a half-sent payload.
    send_abort = !abort_frame.empty() && fd_.valid() && !peer_said_goodbye_ &&
                 (send_queue_.empty() || send_queue_.front().written == 0);
    for (const OutgoingFrame& frame : send_queue_)
      if (frame.request) doomed.push_back(frame.request);
    send_queue_.clear();
    for (Request* receive : matching_.forget_all()) doomed.push_back(receive);
    for (const auto& [number, message] : announced_) doomed.push_back(message.request);
    for (const auto& [number, receive] : cleared_) doomed.push_back(receive.request);
    announced_.clear();
    clears_awaited_.store(0, std::memory_order_relaxed);
    cleared_.clear();
    if (receiving_request_) doomed.push_back(std::exchange(receiving_request_, nullptr));
    receiving_unexpected_ = nullptr;
  }
  for (Request* request : doomed) request->fail(error);
  if (send_abort) {
    size_t sent = 0;
    while (sent < abort_frame.size()) {
      ssize_t n = write_some(abort_frame.data() + sent, abort_frame.size() - sent);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()).count();
      if (left <= 0) break;
      pollfd entry{fd_.get(), POLLOUT, 0};
      ::poll(&entry, 1, static_cast<int>(left));
    }
    // TLS may still hold the sealed record the socket did not take.
    while (tls_ && sent == abort_frame.size() && tls_->flush() == EAGAIN) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()).count();
      if (left <= 0) break;
      pollfd entry{fd_.get(), POLLOUT, 0};
      ::poll(&entry, 1, static_cast<int>(left));
    }
  }
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_WR);
}

size_t Connection::pending_requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_requests_locked();
}

void Connection::send_goodbye() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_ || peer_said_goodbye_ || we_said_goodbye_ || !fd_.valid()) return;
  we_said_goodbye_ = true;
  OutgoingFrame& frame = send_queue_.emplace_back();
  frame.header = encode_header({.kind = FrameKind::goodbye});
  if (send_queue_.size() > 1) return;
  if (flush_locked() != 0) {
    send_queue_.clear();  // the peer is gone already; nothing left to tell it
    return;
  }
  update_write_interest_locked();
}

void Connection::queue_control_locked(FrameKind kind, uint64_t tag_value, uint64_t group, uint64_t signature) {
  OutgoingFrame& frame = send_queue_.emplace_back();
  frame.header = encode_header({.kind = kind, .tag_value = tag_value, .tag_signature = signature, .tag_group = group});
  if (send_queue_.size() > 1 || write_broken_) return;  // goes out behind what is queued
  if (flush_locked() == 0) update_write_interest_locked();
  // A write error is the reader's to report: it sees the end of the stream.
}

void Connection::send_probe(uint64_t probe, uint64_t group) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_ || peer_said_goodbye_ || we_said_goodbye_ || !fd_.valid()) return;
  queue_control_locked(FrameKind::probe, probe, group);
}

bool Connection::send_queue_empty() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_ || (send_queue_.empty() && !(tls_ && tls_->unsent_output()));
}

size_t Connection::undelivered_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fd_.valid()) return 0;
  int unacknowledged = 0;
  if (::ioctl(fd_.get(), SIOCOUTQ, &unacknowledged) != 0 || unacknowledged < 0) return 0;
  return static_cast<size_t>(unacknowledged);
}

void Connection::close_socket() {
  std::lock_guard<std::mutex> reader(reader_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fd_.valid()) return;
  if (tls_) tls_->close_notify();
  ::shutdown(fd_.get(), SHUT_WR);
  for (size_t drained = 0; drained < 4 * kStagingBytes;) {
    ssize_t n = ::recv(fd_.get(), staging_.data(), staging_.size(), MSG_DONTWAIT);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  fd_.reset();
}

}  // namespace chorus::transport::tcp
