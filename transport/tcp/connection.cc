// One peer connection: its construction and the sending side: posting a
// send, the send queue, the plain and TLS write paths. Receiving is in
// connection_receive.cc, failing and closing in connection_close.cc.
#include "transport/tcp/connection.h"

#include <poll.h>
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

Connection::Connection(ConnectionOwner& owner, int peer_rank, int stream, SocketAddress peer_address,
                       AdmittedSocket socket)
    : owner_(owner),
      peer_rank_(peer_rank),
      stream_(stream),
      peer_address_(peer_address),
      peer_label_(cat("peer rank ", peer_rank, " (", peer_address.to_string(),
                      stream > 0 ? cat(", stream ", stream) : std::string(), ")")),
      fd_(std::move(socket.fd)),
      socket_number_(fd_.get()),
      tls_(std::move(socket.tls)),
      eager_window_(eager_window(kDefaultEagerWindowBytes, owner.max_unexpected_bytes())),
      staging_(kStagingBytes) {}

// ---------------------------------------------------------------- sending

void Connection::post_send(Request& request, Tag tag, std::span<const std::byte> data) {
  request.mark_pending();
  std::exception_ptr error;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (owner_.failed()) {
      request.fail(owner_.failure());
      return;
    }
    if (peer_said_goodbye_) {
      error = closed_context_error(cat(" before this rank sent ", describe_tag(tag.group, tag.value)).c_str());
    } else if (!tag.eager && over_eager_window_locked(data.size())) {
      queue_announcement_locked(request, tag, data);
      queued = true;
    } else {
      eager_bytes_sent_ += data.size();
      OutgoingFrame& frame = send_queue_.emplace_back();
      frame.request = &request;
      frame.header = encode_header({.kind = FrameKind::data,
                                    .tag_value = tag.value,
                                    .tag_signature = tag.signature,
                                    .payload_bytes = data.size(),
                                    .tag_group = tag.group});
      frame.payload = data;
      frame.tag = tag;
      queued = true;
      // Only the head of the queue may write: anything behind must wait its turn.
      if (send_queue_.size() == 1 && !write_broken_) {
        int failure = flush_locked();
        if (failure != 0) {
          if (!leave_reset_to_reader_locked(failure)) error = write_error(failure);
        } else {
          update_write_interest_locked();
        }
      }
    }
  }
  if (!error) return;
  owner_.abort(error, owner_.shutting_down() ? LogLevel::debug : LogLevel::warn);
  // A queued request was failed by the abort; one that never entered the queue is ours to fail.
  if (!queued) request.fail(owner_.failure());
}

bool Connection::over_eager_window_locked(size_t bytes) const {
  return past_eager_window(eager_bytes_sent_, peer_claimed_.load(std::memory_order_acquire), bytes, eager_window_);
}

void Connection::queue_announcement_locked(Request& request, Tag tag, std::span<const std::byte> data) {
  const uint64_t number = next_announcement_++;
  announced_.emplace(number, Announced{&request, tag, data});
  clears_awaited_.store(announced_.size(), std::memory_order_relaxed);
  OutgoingFrame& frame = send_queue_.emplace_back();
  frame.header = encode_header({.kind = FrameKind::announce,
                                .tag_value = tag.value,
                                .tag_signature = tag.signature,
                                .payload_bytes = kAnnouncementBytes,
                                .tag_group = tag.group});
  frame.owned_payload.resize(kAnnouncementBytes);
  store_le(frame.owned_payload.data(), data.size(), 8);
  store_le(frame.owned_payload.data() + 8, number, 8);
  frame.payload = frame.owned_payload;
  frame.tag = tag;
  if (send_queue_.size() > 1 || write_broken_) return;  // goes out behind what is queued
  if (flush_locked() == 0) update_write_interest_locked();
  // A write error is the reader's to report: it sees the end of the stream.
}

int Connection::flush_locked() {
  if (tls_) return flush_tls_locked();
  while (!send_queue_.empty()) {
    iovec iov[kMaxIovecs];
    size_t count = 0;
    size_t offered = 0;
    for (OutgoingFrame& frame : send_queue_) {
      if (count + 2 > kMaxIovecs) break;
      size_t offset = frame.written;
      if (offset < kFrameHeaderBytes) {
        iov[count++] = {frame.header.data() + offset, kFrameHeaderBytes - offset};
        offered += kFrameHeaderBytes - offset;
        offset = kFrameHeaderBytes;
      }
      size_t payload_offset = offset - kFrameHeaderBytes;
      size_t payload_left = frame.payload.size() - payload_offset;
      if (payload_left > 0) {
        size_t chunk = std::min(payload_left, kMaxIovBytes);
        iov[count++] = {const_cast<std::byte*>(frame.payload.data() + payload_offset), chunk};
        offered += chunk;
        if (chunk < payload_left) break;  // later frames must not overtake this one's tail
      }
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    ssize_t sent = ::sendmsg(fd_.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return errno;
    }
    advance_send_queue_locked(static_cast<size_t>(sent));
    if (static_cast<size_t>(sent) < offered) return 0;  // the socket is full
  }
  return 0;
}

int Connection::flush_tls_locked() {
  if (int error = tls_->flush(); error != 0) return error == EAGAIN ? 0 : error;
  while (!send_queue_.empty()) {
    OutgoingFrame& frame = send_queue_.front();
    const std::byte* data;
    size_t bytes;
    if (frame.written < kFrameHeaderBytes) {
      const size_t header_left = kFrameHeaderBytes - frame.written;
      const size_t payload_part = std::min(frame.payload.size(), kTlsRecordBytes - header_left);
      tls_record_.resize(header_left + payload_part);
      std::memcpy(tls_record_.data(), frame.header.data() + frame.written, header_left);
      if (payload_part > 0) std::memcpy(tls_record_.data() + header_left, frame.payload.data(), payload_part);
      data = tls_record_.data();
      bytes = tls_record_.size();
    } else {
      const size_t payload_offset = frame.written - kFrameHeaderBytes;
      data = frame.payload.data() + payload_offset;
      bytes = frame.payload.size() - payload_offset;
    }
    const ssize_t sent = tls_->write(data, bytes);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return 0;
      if (errno == EPROTO) CHORUS_LOG(warn, owner_.rank(), "tcp: ", peer_label_, ": ", tls_->error());
      return errno;
    }
    advance_send_queue_locked(static_cast<size_t>(sent));
  }
  return 0;
}

void Connection::advance_send_queue_locked(size_t sent) {
  size_t left = sent;
  while (!send_queue_.empty()) {
    OutgoingFrame& frame = send_queue_.front();
    size_t frame_left = kFrameHeaderBytes + frame.payload.size() - frame.written;
    size_t taken = std::min(left, frame_left);
    frame.written += taken;
    left -= taken;
    if (taken < frame_left) break;
    Request* done = frame.request;
    send_queue_.pop_front();
    if (done) done->complete();
  }
}

ssize_t Connection::read_some(iovec* iov, int count) {
  if (!tls_) return ::readv(fd_.get(), iov, count);
  // OpenSSL decrypts into each buffer in turn (the payload lands in place).
  // Unlike readv, it keeps going while records arrive, so on a full stream
  // one call could take a whole message: it stops after a read budget (other
  // connections get their turn) and as soon as an abort stops reading (an
  // abort waits for the reader, and must not wait for the message).
  size_t total = 0;
  for (int i = 0; i < count; ++i) {
    auto* at = static_cast<std::byte*>(iov[i].iov_base);
    size_t filled = 0;
    while (filled < iov[i].iov_len) {
      if (total + filled > 0 && (total + filled >= kReadBudgetBytes || !reading_.load(std::memory_order_relaxed)))
        return static_cast<ssize_t>(total + filled);
      const ssize_t n = tls_->read(at + filled, iov[i].iov_len - filled);
      if (n > 0) {
        filled += static_cast<size_t>(n);
        continue;
      }
      if (total + filled > 0 && (n == 0 || errno == EAGAIN)) return static_cast<ssize_t>(total + filled);
      if (n < 0 && errno == EPROTO) CHORUS_LOG(warn, owner_.rank(), "tcp: ", peer_label_, ": ", tls_->error());
      return n;
    }
    total += filled;
  }
  return static_cast<ssize_t>(total);
}

ssize_t Connection::write_some(const std::byte* data, size_t bytes) {
  if (tls_) return tls_->write(data, bytes);
  return ::send(fd_.get(), data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
}

std::exception_ptr Connection::write_error(int error) {
  std::string sending;
  if (!send_queue_.empty()) {
    const OutgoingFrame& frame = send_queue_.front();
    sending = cat(" while sending ", describe_tag(frame.tag.group, frame.tag.value), " (", frame.payload.size(), " bytes)");
  }
  const std::string message = cat("rank ", owner_.rank(), ": connection to ", peer_label_,
                                  error == EPIPE || error == ECONNRESET ? " closed by the peer (" : " failed (",
                                  errno_text(error), ")", sending);
  if (error == EPIPE || error == ECONNRESET) return std::make_exception_ptr(PeerLostError(message, peer_rank_));
  return std::make_exception_ptr(IoError(message, peer_rank_));
}

bool Connection::leave_reset_to_reader_locked(int error) {
  if ((error != EPIPE && error != ECONNRESET) || !reading_.load(std::memory_order_relaxed)) return false;
  write_broken_ = true;
  if (write_interest_) {
    owner_.set_write_interest(*this, false);
    write_interest_ = false;
    sends_queued_.store(false, std::memory_order_relaxed);
  }
  return true;
}

void Connection::update_write_interest_locked() {
  bool want = !send_queue_.empty() || (tls_ && tls_->unsent_output());
  if (want == write_interest_) return;
  owner_.set_write_interest(*this, want);
  write_interest_ = want;
  sends_queued_.store(want, std::memory_order_relaxed);
}

void Connection::on_writable() {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || write_broken_) return;
    int failure = flush_locked();
    if (failure != 0) {
      if (!leave_reset_to_reader_locked(failure)) error = write_error(failure);
    } else {
      update_write_interest_locked();
    }
  }
  if (error) owner_.abort(error, owner_.shutting_down() ? LogLevel::debug : LogLevel::warn);
}


}  // namespace chorus::transport::tcp
