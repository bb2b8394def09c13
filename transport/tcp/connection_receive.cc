// One peer connection's receiving side: posted receives matched against
// arriving frames, the unexpected-message queue, the frame state machine
// and the errors a peer's bytes can earn (mismatches, corrupt frames, end of
// stream).
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
#include "transport/receive_matching.h"
#include "transport/tcp/io_limits.h"

namespace chorus::transport::tcp {
namespace {

std::string hex(uint64_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value;
  return out.str();
}

}  // namespace

// ---------------------------------------------------------------- receiving

void Connection::post_recv(Request& request, Tag tag, std::span<std::byte> data) {
  post_recv(request, tag, data, false);
}

bool Connection::post_recv(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived) {
  mark_pending_unless_only_if_arrived(request, only_if_arrived);
  ReceivePosting posting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posting = post_receive_locked(
        matching_, owner_, peer_rank_, owner_.failed(), peer_said_goodbye_, request, tag, data, only_if_arrived,
        [&](UnexpectedMessage& arrived, const PostedReceive& receive) {
          if (arrived.announced) {
            const uint64_t number = arrived.announcement;
            matching_.remove(arrived);
            receives_waiting_.fetch_add(1, std::memory_order_relaxed);
            clear_locked(number, receive);
          } else if (!arrived.complete) {
            arrived.claimant = receive;
            receives_waiting_.fetch_add(1, std::memory_order_relaxed);
            claimed_eager_locked(arrived.bytes);
            if (&arrived == receiving_unexpected_) claimed_while_arriving_.store(true, std::memory_order_release);
          } else {
            arrived.payload.copy_to(data.data(), data.size());
            claimed_eager_locked(arrived.bytes);
            matching_.remove(arrived);
            request.complete();
          }
        });
    if (posting.kind == ReceivePosting::Kind::posted) receives_waiting_.fetch_add(1, std::memory_order_relaxed);
  }
  return finish_posting(posting, owner_, peer_rank_, request, tag);
}

std::optional<Tag> Connection::find_unclaimed(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return matching_.find_unclaimed(group, oldest, wanted);
}

void Connection::on_readable() {
  std::unique_lock<std::mutex> reader(reader_);
  read_available();
  release_reader(reader);
}

bool Connection::read_from_caller(bool sweep_idle) {
  if (!wants_caller_read(sweep_idle)) return false;
  // The progress thread (or another waiter) is reading: it will land our bytes.
  std::unique_lock<std::mutex> reader(reader_, std::try_to_lock);
  if (!reader.owns_lock()) return false;
  bool consumed = read_available();
  release_reader(reader);
  return consumed;
}

void Connection::abort_after_read(std::exception_ptr reason, LogLevel level) {
  reading_.store(false, std::memory_order_relaxed);
  after_read_.record(std::move(reason), level);
}

void Connection::release_reader(std::unique_lock<std::mutex>& reader) {
  reader.unlock();
  after_read_.report_to(owner_);
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
    // A read shorter than its buffers emptied the socket: another would
    // find nothing (a system call per message). Level-triggered epoll, or
    // the caller's next poll, sees bytes that arrive after it. TLS may hold
    // decrypted bytes back, so it reads on.
    if (!tls_ && total < direct + staging_.size()) return consumed;
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

std::byte* Connection::UnexpectedBytes::add_chunk(size_t bytes) {
  std::unique_ptr<std::byte[]> piece = std::make_unique_for_overwrite<std::byte[]>(bytes);
  std::byte* start = piece.get();
  chunks_.push_back({std::move(piece), bytes});
  capacity_ += bytes;
  return start;
}

void Connection::UnexpectedBytes::copy_to(std::byte* out, size_t bytes) const {
  for (const Chunk& chunk : chunks_) {
    if (bytes == 0) return;
    const size_t part = std::min(bytes, chunk.size);
    std::memcpy(out, chunk.bytes.get(), part);
    out += part;
    bytes -= part;
  }
}

size_t Connection::writable_now() {
  if (sink_ == Sink::unexpected && claimed_while_arriving_.load(std::memory_order_acquire)) land_claimed_in_place();
  if (sink_ != Sink::unexpected) return payload_remaining_;
  // Chunks that double the total, from 1 MiB (a whole segment of the
  // algorithms' default 512 KiB in one chunk): a length a peer announced
  // costs memory only as its bytes arrive, past that first chunk.
  constexpr size_t kFirstChunkBytes = size_t{1} << 20;
  UnexpectedBytes& payload = receiving_unexpected_->payload;
  const size_t written = frame_.payload_bytes - payload_remaining_;
  if (written == payload.capacity() && payload_remaining_ > 0) {
    try {
      payload_target_ = payload.add_chunk(std::min(payload_remaining_, std::max(kFirstChunkBytes, payload.capacity())));
    } catch (const std::bad_alloc&) {
      abort_after_read(std::make_exception_ptr(IoError(
                           cat("rank ", owner_.rank(), ": cannot buffer an unexpected message of ",
                               frame_.payload_bytes, " bytes (", describe_tag(frame_.tag_group, frame_.tag_value),
                               ") from ", peer_label_, ": out of memory after ", written, " bytes"),
                           peer_rank_)),
                       LogLevel::warn);
      return 0;
    }
  }
  return payload.capacity() - written;
}

void Connection::land_claimed_in_place() {
  std::lock_guard<std::mutex> lock(mutex_);
  claimed_while_arriving_.store(false, std::memory_order_relaxed);
  UnexpectedMessage* message = receiving_unexpected_;
  if (failed_ || !message || !message->claimed()) return;
  const PostedReceive receive = message->claimant;
  const size_t written = frame_.payload_bytes - payload_remaining_;
  message->payload.copy_to(receive.buffer.data(), written);
  matching_.remove(*message);
  receiving_unexpected_ = nullptr;
  // From here the message is a posted receive being filled: finish_payload
  // completes it, and the receive stays counted in receives_waiting_.
  receiving_request_ = receive.request;
  payload_target_ = receive.buffer.data() + written;
  sink_ = Sink::user_buffer;
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
    case FrameKind::announce:
      if (frame_.payload_bytes != kAnnouncementBytes)
        return corrupt(cat("an announcement of ", frame_.payload_bytes, " bytes"));
      sink_ = Sink::announcement;
      payload_target_ = announcement_.data();
      payload_remaining_ = kAnnouncementBytes;
      in_payload_ = true;
      return;
    case FrameKind::clear:
      if (frame_.payload_bytes != 0) return corrupt(cat("a go-ahead with ", frame_.payload_bytes, " payload bytes"));
      return on_clear();
    case FrameKind::announced_data:
      return begin_announced_data();
    case FrameKind::claimed:
      if (frame_.payload_bytes != 0) return corrupt(cat("a claimed count with ", frame_.payload_bytes, " payload bytes"));
      return on_claimed();
    case FrameKind::probe_answer: {
      if (frame_.payload_bytes != 0)
        return corrupt(cat("a probe answer with ", frame_.payload_bytes, " payload bytes"));
      return probe_answers_.record(frame_.tag_value, frame_.tag_group, frame_.tag_signature);
    }
  }
}

void Connection::begin_data_payload() {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    const auto match = match_arrival_locked(matching_, owner_, peer_rank_, peer_label_, frame_tag(),
                                            frame_.payload_bytes, frame_.payload_bytes);
    error = match.error;
    if (match.receive.request) {
      receiving_request_ = match.receive.request;
      payload_target_ = match.receive.buffer.data();
      claimed_eager_locked(frame_.payload_bytes);
    } else if (match.kept) {
      receiving_unexpected_ = match.kept;
      payload_target_ = nullptr;  // writable_now() allocates as bytes come
    }
  }
  if (error) return abort_after_read(error, LogLevel::warn);
  // Claimable from now on (post_recv_if_arrived), while the payload arrives.
  if (receiving_unexpected_) owner_.arrivals().notify();
  in_payload_ = true;
  payload_remaining_ = frame_.payload_bytes;
  sink_ = receiving_request_ ? Sink::user_buffer : Sink::unexpected;
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
      if (!message->claimed()) return;
      const PostedReceive receive = message->claimant;
      claimed_while_arriving_.store(false, std::memory_order_relaxed);
      message->payload.copy_to(receive.buffer.data(), frame_.payload_bytes);
      matching_.remove(*message);
      receives_waiting_.fetch_sub(1, std::memory_order_relaxed);
      receive.request->complete();
      return;
    }
    case Sink::announcement:
      return on_announcement();
    case Sink::abort_text: {
      std::string_view text(reinterpret_cast<const char*>(abort_text_.data()), abort_text_.size());
      auto error = adopt_abort(frame_.tag_value, frame_.tag_signature, text, owner_.rank(), peer_rank_);
      return abort_after_read(error, LogLevel::warn);
    }
  }
}

// ---------------------------------------------------------------- the eager window

void Connection::on_announcement() {
  const uint64_t bytes = load_le(announcement_.data(), 8);
  const uint64_t number = load_le(announcement_.data() + 8, 8);
  const Tag tag = frame_tag();
  std::exception_ptr error;
  bool kept = false;
  bool twice = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    if (!open_announcements_.insert(number).second) {
      twice = true;
    } else {
      const auto match = match_arrival_locked(matching_, owner_, peer_rank_, peer_label_, tag, bytes,
                                              kAnnouncementCharge);
      error = match.error;
      if (match.receive.request) {
        clear_locked(number, match.receive);
        return;
      } else if (match.kept) {
        match.kept->complete = true;
        match.kept->announced = true;
        match.kept->announcement = number;
        kept = true;
      }
    }
  }
  if (kept) {
    owner_.arrivals().notify();
    return;
  }
  if (twice) return corrupt(cat("announcement ", number, " twice"));
  if (error) abort_after_read(error, LogLevel::warn);
}

void Connection::clear_locked(uint64_t number, const PostedReceive& receive) {
  cleared_.insert_or_assign(number, Cleared{receive.request, receive.buffer});
  if (!failed_ && !we_said_goodbye_ && fd_.valid()) queue_control_locked(FrameKind::clear, number);
}

void Connection::claimed_eager_locked(size_t bytes) {
  claimed_bytes_ += bytes;
  // Reported every quarter window: the peer's view lags by at most that.
  if (claimed_bytes_ - claimed_reported_ < std::max<size_t>(eager_window_ / 4, 1)) return;
  claimed_reported_ = claimed_bytes_;
  if (!failed_ && !we_said_goodbye_ && fd_.valid()) queue_control_locked(FrameKind::claimed, claimed_bytes_);
}

void Connection::on_clear() {
  const uint64_t number = frame_.tag_value;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    auto found = announced_.find(number);
    if (found != announced_.end()) {
      const Announced message = found->second;
      announced_.erase(found);
      clears_awaited_.store(announced_.size(), std::memory_order_relaxed);
      OutgoingFrame& frame = send_queue_.emplace_back();
      frame.request = message.request;
      frame.header = encode_header({.kind = FrameKind::announced_data,
                                    .tag_value = number,
                                    .tag_signature = message.tag.signature,
                                    .payload_bytes = message.data.size(),
                                    .tag_group = message.tag.group});
      frame.payload = message.data;
      frame.tag = message.tag;
      if (send_queue_.size() == 1 && !write_broken_ && flush_locked() == 0) update_write_interest_locked();
      return;
    }
  }
  corrupt(cat("a go-ahead for message ", number, ", which this rank never announced or sent already"));
}

void Connection::begin_announced_data() {
  const uint64_t number = frame_.tag_value;
  std::optional<Cleared> cleared;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    auto found = cleared_.find(number);
    if (found != cleared_.end() && found->second.buffer.size() == frame_.payload_bytes) {
      cleared = found->second;
      cleared_.erase(found);
      open_announcements_.erase(number);
      receiving_request_ = cleared->request;
      payload_target_ = cleared->buffer.data();
    }
  }
  if (!cleared)
    return corrupt(cat("the ", frame_.payload_bytes, " bytes of announced message ", number,
                       ", which this rank did not ask for at that length"));
  in_payload_ = true;
  payload_remaining_ = frame_.payload_bytes;
  sink_ = Sink::user_buffer;
  if (payload_remaining_ == 0) finish_payload();
}

void Connection::on_claimed() {
  // Only ever grows; a smaller figure (a hostile peer's) changes nothing.
  uint64_t known = peer_claimed_.load(std::memory_order_relaxed);
  while (frame_.tag_value > known &&
         !peer_claimed_.compare_exchange_weak(known, frame_.tag_value, std::memory_order_acq_rel)) {
  }
}

void Connection::on_goodbye() {
  size_t pending = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    peer_said_goodbye_ = true;
    peer_closed_.store(true, std::memory_order_release);
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

std::exception_ptr Connection::closed_context_error(const char* detail) const {
  return transport::closed_context_error(owner_.rank(), peer_rank_, detail);
}

size_t Connection::pending_requests_locked() const {
  size_t pending = receiving_request_ ? 1 : 0;
  for (const OutgoingFrame& frame : send_queue_)
    if (frame.request) ++pending;
  pending += announced_.size() + cleared_.size();
  pending += matching_.waiting_receives();
  return pending;
}

}  // namespace chorus::transport::tcp
