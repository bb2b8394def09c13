// One peer connection: posting, the send queue, the receive state machine and
// the unexpected-message queue.
#include "transport/tcp/pair.h"

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

namespace chorus::transport::tcp {
namespace {

// Frames and small payloads are read through this buffer so one read syscall
// serves many small messages; large payloads bypass it (readv lands them in
// place and only the bytes after the payload's end come here).
constexpr size_t kStagingBytes = 256 * 1024;
// Linux moves at most ~2 GiB per call; smaller iovecs keep every call well-formed.
constexpr size_t kMaxIovBytes = size_t{1} << 30;
constexpr size_t kMaxIovecs = 64;
// Bytes read from one connection per readiness event before the progress
// thread looks at the others, so one streaming peer cannot starve the rest.
constexpr size_t kReadBudgetBytes = 16 * 1024 * 1024;
// A frame's header goes into one TLS record with up to this much of its
// payload (one record's worth), so a small message is one record.
constexpr size_t kTlsRecordBytes = 16 * 1024;

std::string hex(uint64_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value;
  return out.str();
}

}  // namespace

Connection::Connection(ConnectionOwner& owner, int peer_rank, int stream, SocketAddress peer_address,
                       AdmittedSocket socket)
    : owner_(owner),
      peer_rank_(peer_rank),
      stream_(stream),
      peer_address_(peer_address),
      peer_label_(cat("peer rank ", peer_rank, " (", peer_address.to_string(),
                      stream > 0 ? cat(", stream ", stream) : std::string(), ")")),
      fd_(std::move(socket.fd)),
      tls_(std::move(socket.tls)),
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
    } else {
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
  }
  return true;
}

void Connection::update_write_interest_locked() {
  bool want = !send_queue_.empty() || (tls_ && tls_->unsent_output());
  if (want == write_interest_) return;
  owner_.set_write_interest(*this, want);
  write_interest_ = want;
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

// ---------------------------------------------------------------- receiving

void Connection::post_recv(Request& request, Tag tag, std::span<std::byte> data) {
  post_recv(request, tag, data, false);
}

bool Connection::post_recv(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived) {
  // Pending from here on, except where only_if_arrived finds nothing: then
  // the request must stay idle, so it is marked only once it is taken on.
  if (!only_if_arrived) request.mark_pending();
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (owner_.failed()) {
      if (only_if_arrived) request.mark_pending();
      request.fail(owner_.failure());
      return true;
    }
    auto found = unexpected_.find(TagKey(tag));
    if (found != unexpected_.end()) {
      auto& queue = found->second;
      auto message = std::find_if(queue.begin(), queue.end(),
                                  [](const auto& m) { return m->waiting.request == nullptr; });
      if (message != queue.end()) {
        if (only_if_arrived) request.mark_pending();
        UnexpectedMessage& arrived = **message;
        if (arrived.bytes != data.size() || arrived.tag.signature != tag.signature) {
          error = mismatch_error(arrived.tag, arrived.bytes, tag, data.size());
        } else if (!arrived.complete) {
          arrived.waiting = {&request, tag, data};
          receives_waiting_.fetch_add(1, std::memory_order_relaxed);
          return true;
        } else {
          if (!data.empty()) std::memcpy(data.data(), arrived.payload.data(), data.size());
          unexpected_bytes_ -= arrived.bytes;
          queue.erase(message);
          if (queue.empty()) unexpected_.erase(found);
          request.complete();
          return true;
        }
      }
    }
    if (error) {
      // reported below, without the lock
    } else if (only_if_arrived) {
      return false;
    } else if (peer_said_goodbye_) {
      error = closed_context_error(
          cat(" before sending ", describe_tag(tag.group, tag.value), " that this rank expects").c_str());
    } else {
      posted_[TagKey(tag)].push_back({&request, tag, data});
      receives_waiting_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  bool mismatch = false;
  try {
    std::rethrow_exception(error);
  } catch (const MismatchError&) {
    mismatch = true;
  } catch (...) {
  }
  owner_.abort(error, mismatch ? LogLevel::warn : LogLevel::debug);
  request.fail(owner_.failure());
  return true;
}

void Connection::on_readable() {
  std::unique_lock<std::mutex> reader(reader_);
  read_available();
  release_reader(reader);
}

bool Connection::read_from_caller() {
  if (!reading_.load(std::memory_order_relaxed)) return false;
  if (receives_waiting_.load(std::memory_order_relaxed) == 0 && !parked_.load(std::memory_order_acquire))
    return false;
  // The progress thread (or another waiter) is reading: it will land our bytes.
  std::unique_lock<std::mutex> reader(reader_, std::try_to_lock);
  if (!reader.owns_lock()) return false;
  bool consumed = read_available();
  release_reader(reader);
  return consumed;
}

void Connection::abort_after_read(std::exception_ptr reason, LogLevel level) {
  reading_.store(false, std::memory_order_relaxed);
  if (abort_after_read_) return;  // the first error is the one to report
  abort_after_read_ = std::move(reason);
  abort_after_read_level_ = level;
}

void Connection::release_reader(std::unique_lock<std::mutex>& reader) {
  std::exception_ptr error = std::exchange(abort_after_read_, nullptr);
  LogLevel level = abort_after_read_level_;
  reader.unlock();
  if (error) owner_.abort(error, level);
}

bool Connection::read_available() {
  bool consumed = false;
  size_t budget = kReadBudgetBytes;
  // Bytes TLS already decrypted are announced by no readiness event: a budget
  // that runs out leaves none of them behind.
  while (reading_.load(std::memory_order_relaxed) && (budget > 0 || (tls_ && tls_->buffered_input()))) {
    iovec iov[2];
    int count = 0;
    size_t direct = 0;
    if (in_payload_ && payload_remaining_ > 0) {
      direct = std::min(writable_now(), kMaxIovBytes);
      if (!reading_.load(std::memory_order_relaxed)) return true;
      iov[count++] = {payload_target_, direct};
    }
    iov[count++] = {staging_.data(), staging_.size()};
    ssize_t received = read_some(iov, count);
    if (received == 0) {
      on_end_of_stream(0);
      return true;
    }
    if (received < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return consumed;
      on_end_of_stream(errno);
      return true;
    }
    consumed = true;
    size_t total = static_cast<size_t>(received);
    size_t landed = std::min(total, direct);
    if (landed > 0) {
      payload_target_ += landed;
      payload_remaining_ -= landed;
      if (payload_remaining_ == 0) finish_payload();
    }
    consume(staging_.data(), total - landed);
    budget -= std::min(budget, total);
  }
  return consumed;
}

void Connection::consume(const std::byte* data, size_t length) {
  while (length > 0 && reading_.load(std::memory_order_relaxed)) {
    size_t taken;
    if (!in_payload_) {
      taken = std::min(length, kFrameHeaderBytes - header_received_);
      std::memcpy(header_bytes_.data() + header_received_, data, taken);
      header_received_ += taken;
    } else {
      taken = std::min(length, writable_now());
      if (!reading_.load(std::memory_order_relaxed)) return;
      std::memcpy(payload_target_, data, taken);
      payload_target_ += taken;
      payload_remaining_ -= taken;
    }
    data += taken;
    length -= taken;
    if (!in_payload_ && header_received_ == kFrameHeaderBytes) {
      header_received_ = 0;
      on_header();
    } else if (in_payload_ && payload_remaining_ == 0) {
      finish_payload();
    }
  }
}

void Connection::UnexpectedBytes::grow(size_t size, size_t keep) {
  std::unique_ptr<std::byte[]> grown = std::make_unique_for_overwrite<std::byte[]>(size);
  if (keep > 0) std::memcpy(grown.get(), bytes_.get(), keep);
  bytes_ = std::move(grown);
  size_ = size;
}

size_t Connection::writable_now() {
  if (sink_ != Sink::unexpected) return payload_remaining_;
  // Grown in steps that double, from 1 MiB (a whole segment of the
  // algorithms' default 512 KiB in one step): a length a peer announced
  // costs memory only as its bytes arrive, past that first step.
  constexpr size_t kFirstStepBytes = size_t{1} << 20;
  UnexpectedBytes& payload = receiving_unexpected_->payload;
  const size_t written = frame_.payload_bytes - payload_remaining_;
  if (written == payload.size() && payload_remaining_ > 0) {
    try {
      payload.grow(std::min<size_t>(frame_.payload_bytes, std::max(kFirstStepBytes, 2 * payload.size())), written);
    } catch (const std::bad_alloc&) {
      abort_after_read(std::make_exception_ptr(IoError(
                           cat("rank ", owner_.rank(), ": cannot buffer an unexpected message of ",
                               frame_.payload_bytes, " bytes (", describe_tag(frame_.tag_group, frame_.tag_value),
                               ") from ", peer_label_, ": out of memory after ", written, " bytes"),
                           peer_rank_)),
                       LogLevel::warn);
      return 0;
    }
    payload_target_ = payload.data() + written;
  }
  return payload.size() - written;
}

void Connection::on_header() {
  frame_ = decode_header(header_bytes_.data());
  if (frame_.magic != kFrameMagic || frame_.version != kWireVersion || !is_known_kind(frame_.kind))
    return corrupt(cat("a frame header with magic ", hex(frame_.magic), ", version ", frame_.version,
                       " and kind ", static_cast<unsigned>(frame_.kind)));
  switch (frame_.kind) {
    case FrameKind::data:
      return begin_data_payload();
    case FrameKind::abort:
      if (frame_.payload_bytes > kMaxAbortTextBytes)
        return corrupt(cat("an abort frame of ", frame_.payload_bytes, " bytes"));
      abort_text_.assign(frame_.payload_bytes, std::byte{0});
      sink_ = Sink::abort_text;
      payload_target_ = abort_text_.data();
      payload_remaining_ = frame_.payload_bytes;
      in_payload_ = true;
      if (payload_remaining_ == 0) finish_payload();
      return;
    case FrameKind::goodbye:
      if (frame_.payload_bytes != 0)
        return corrupt(cat("a goodbye frame with ", frame_.payload_bytes, " payload bytes"));
      return on_goodbye();
    case FrameKind::probe: {
      if (frame_.payload_bytes != 0) return corrupt(cat("a probe frame with ", frame_.payload_bytes, " payload bytes"));
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failed_ && !we_said_goodbye_ && fd_.valid())
        queue_control_locked(FrameKind::probe_answer, frame_.tag_value, frame_.tag_group,
                             owner_.position_in(frame_.tag_group));
      return;
    }
    case FrameKind::probe_answer: {
      if (frame_.payload_bytes != 0)
        return corrupt(cat("a probe answer with ", frame_.payload_bytes, " payload bytes"));
      // The position first: whoever sees the probe answered may read it.
      position_answer_.record(frame_.tag_value, frame_.tag_group, frame_.tag_signature);
      uint64_t known = answered_probe_.load(std::memory_order_relaxed);
      while (frame_.tag_value > known &&
             !answered_probe_.compare_exchange_weak(known, frame_.tag_value, std::memory_order_acq_rel)) {
      }
      return;
    }
  }
}

void Connection::begin_data_payload() {
  std::exception_ptr error;
  PostedRecv match;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    auto found = posted_.find(TagKey(frame_.tag_group, frame_.tag_value));
    if (found != posted_.end()) {
      match = found->second.front();
      found->second.pop_front();
      if (found->second.empty()) posted_.erase(found);
      receiving_request_ = match.request;
    } else if (frame_.payload_bytes > owner_.max_unexpected_bytes() - unexpected_bytes_) {
      error = std::make_exception_ptr(IoError(
          cat("rank ", owner_.rank(), ": ", peer_label_, " sent a message of ", frame_.payload_bytes, " bytes (",
              describe_tag(frame_.tag_group, frame_.tag_value), ") that no receive was posted for, with ",
              unexpected_bytes_, " bytes of such messages from it buffered already: more than the limit of ",
              owner_.max_unexpected_bytes(), " bytes (CHORUS_MAX_UNEXPECTED_BYTES). Post receives before peers "
              "send this much, or raise the limit"),
          peer_rank_));
    } else {
      auto message = std::make_unique<UnexpectedMessage>();
      message->tag = frame_tag();
      message->bytes = frame_.payload_bytes;
      unexpected_bytes_ += message->bytes;
      receiving_unexpected_ = message.get();
      unexpected_[TagKey(message->tag)].push_back(std::move(message));
    }
  }
  if (error) return abort_after_read(error, LogLevel::warn);
  // Claimable from now on (post_recv_if_arrived), while the payload arrives.
  if (receiving_unexpected_) owner_.arrivals().notify();
  in_payload_ = true;
  payload_remaining_ = frame_.payload_bytes;
  if (receiving_request_) {
    sink_ = Sink::user_buffer;
    if (match.buffer.size() != frame_.payload_bytes || match.tag.signature != frame_.tag_signature)
      return abort_after_read(mismatch_error(frame_tag(), frame_.payload_bytes, match.tag, match.buffer.size()),
                              LogLevel::warn);
    payload_target_ = match.buffer.data();
  } else {
    sink_ = Sink::unexpected;
    payload_target_ = nullptr;  // writable_now() allocates as bytes come
  }
  if (payload_remaining_ == 0) finish_payload();
}

void Connection::finish_payload() {
  in_payload_ = false;
  switch (sink_) {
    case Sink::user_buffer: {
      Request* done = nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        done = std::exchange(receiving_request_, nullptr);
      }
      if (done) {
        receives_waiting_.fetch_sub(1, std::memory_order_relaxed);
        done->complete();
      }
      return;
    }
    case Sink::unexpected: {
      std::lock_guard<std::mutex> lock(mutex_);
      UnexpectedMessage* message = std::exchange(receiving_unexpected_, nullptr);
      if (failed_ || !message) return;
      message->complete = true;
      Request* waiting = message->waiting.request;
      if (!waiting) return;
      if (!message->payload.empty())
        std::memcpy(message->waiting.buffer.data(), message->payload.data(), message->payload.size());
      unexpected_bytes_ -= message->bytes;
      const TagKey key(message->tag);
      auto& queue = unexpected_[key];
      queue.erase(std::find_if(queue.begin(), queue.end(),
                               [&](const auto& m) { return m.get() == message; }));
      if (queue.empty()) unexpected_.erase(key);
      receives_waiting_.fetch_sub(1, std::memory_order_relaxed);
      waiting->complete();
      return;
    }
    case Sink::abort_text: {
      std::string_view text(reinterpret_cast<const char*>(abort_text_.data()), abort_text_.size());
      auto error = adopt_abort(frame_.tag_value, frame_.tag_signature, text, owner_.rank(), peer_rank_);
      return abort_after_read(error, LogLevel::warn);
    }
  }
}

void Connection::on_goodbye() {
  size_t pending = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    peer_said_goodbye_ = true;
    pending = pending_requests_locked();
  }
  CHORUS_LOG(debug, owner_.rank(), "tcp: ", peer_label_, " closed its context");
  if (pending > 0)
    abort_after_read(closed_context_error(cat(" while ", pending, " requests with it were pending").c_str()),
                     LogLevel::debug);
}

void Connection::on_end_of_stream(int error) {
  reading_.store(false, std::memory_order_relaxed);
  owner_.stop_watching(*this);
  bool expected;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Sends stuck behind a broken write still need their error.
    expected = failed_ || (peer_said_goodbye_ && !(write_broken_ && !send_queue_.empty()));
  }
  if (expected || owner_.shutting_down()) {
    CHORUS_LOG(debug, owner_.rank(), "tcp: connection to ", peer_label_, " closed");
    return;
  }
  std::string how = error ? errno_text(error) : "end of stream";
  abort_after_read(std::make_exception_ptr(PeerLostError(cat("rank ", owner_.rank(), ": connection to ", peer_label_,
                                                             " closed by the peer (", how, " ", receiving_text(), ")"),
                                                         peer_rank_)),
                   LogLevel::warn);
}

std::string Connection::receiving_text() const {
  if (in_payload_ && sink_ != Sink::abort_text) {
    size_t arrived = frame_.payload_bytes - payload_remaining_;
    return cat("while receiving ", describe_tag(frame_.tag_group, frame_.tag_value), ": ", arrived, " of ",
               frame_.payload_bytes, " bytes had arrived");
  }
  if (header_received_ > 0) return "in the middle of a frame header";
  return "between messages";
}

void Connection::corrupt(const std::string& what) {
  abort_after_read(std::make_exception_ptr(IoError(
                       cat("rank ", owner_.rank(), ": ", peer_label_, " sent ", what,
                           " (corrupt stream, or not a chorus peer of this job)"),
                       peer_rank_)),
                   LogLevel::warn);
}

std::exception_ptr Connection::mismatch_error(const Tag& theirs, size_t their_bytes, const Tag& mine,
                                             size_t my_bytes) const {
  return transport::mismatch_error(owner_.rank(), peer_rank_, owner_.describe_signature(theirs.signature),
                                   owner_.describe_signature(mine.signature), mine, their_bytes, my_bytes);
}

std::exception_ptr Connection::closed_context_error(const char* detail) const {
  return transport::closed_context_error(owner_.rank(), peer_rank_, detail);
}

size_t Connection::pending_requests_locked() const {
  size_t pending = receiving_request_ ? 1 : 0;
  for (const OutgoingFrame& frame : send_queue_)
    if (frame.request) ++pending;
  for (const auto& [value, queue] : posted_) pending += queue.size();
  for (const auto& [value, queue] : unexpected_)
    for (const auto& message : queue)
      if (message->waiting.request) ++pending;
  return pending;
}

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
    for (auto& [value, queue] : posted_)
      for (const PostedRecv& posted : queue) doomed.push_back(posted.request);
    posted_.clear();
    for (auto& [value, queue] : unexpected_)
      for (auto& message : queue)
        if (message->waiting.request) doomed.push_back(message->waiting.request);
    unexpected_.clear();
    unexpected_bytes_ = 0;
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
