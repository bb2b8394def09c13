// One shared-memory peer: sending, receiving, pulls, failure (channel.h).
#include "transport/shm/channel.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "transport/abort_report.h"
#include "transport/peer_errors.h"
#include "transport/shm/side_channel.h"

namespace chorus::transport::shm {
namespace {

// The most one process_vm_readv call copies before the puller checks
// whether the device failed meanwhile (so abort never waits long for it).
constexpr size_t kPullChunk = size_t{8} << 20;

struct PullOffer {
  uint64_t address = 0;
  uint32_t slot = 0;
  uint32_t reserved = 0;
  uint64_t generation = 0;
};
struct PulledNote {
  uint32_t slot = 0;
  uint32_t reserved = 0;
  uint64_t generation = 0;
};

template <class T>
std::span<const std::byte> bytes_of(const T& value) {
  return {reinterpret_cast<const std::byte*>(&value), sizeof(T)};
}

Tag tag_of(const RecordHeader& header) { return {header.value, header.signature, header.group}; }

}  // namespace

Channel::Channel(ChannelOwner& owner, ChannelSetup setup)
    : owner_(owner),
      peer_rank_(setup.peer_rank),
      peer_pid_(setup.peer_pid),
      peer_label_(cat("shared-memory peer rank ", setup.peer_rank, " (pid ", setup.peer_pid, ")")),
      side_(std::move(setup.side)),
      peer_doorbell_(std::move(setup.peer_doorbell)),
      segment_(std::move(setup.segment)),
      peer_pulls_(setup.peer_pulls),
      we_pull_(setup.we_pull),
      pull_threshold_(setup.pull_threshold) {
  // Direction 0 carries the listener's messages, 1 the dialer's.
  const int outgoing = setup.listener ? 0 : 1;
  const int incoming = 1 - outgoing;
  out_ = RingWriter(segment_.control(outgoing), segment_.ring(outgoing), segment_.ring_bytes());
  in_ = RingReader(segment_.control(incoming), segment_.ring(incoming), segment_.ring_bytes());
  offered_slots_ = segment_.pull_slots(outgoing);
  peer_slots_ = segment_.pull_slots(incoming);
  for (uint32_t slot = kPullSlots; slot > 0; --slot) free_slots_.push_back(slot - 1);
  // Both processes hold the memory mapped: the descriptor has done its job.
  segment_.close_fd();
}

// ---------------------------------------------------------------- sending

void Channel::post_send(Request& request, Tag tag, std::span<const std::byte> data) {
  request.mark_pending();
  std::exception_ptr error;
  bool doorbell = false;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(send_mutex_);
    if (owner_.failed()) {
      request.fail(owner_.failure());
      return;
    }
    if (peer_gone_.load(std::memory_order_acquire)) {
      error = closed_error(cat(" before this rank sent ", describe_tag(tag.group, tag.value)));
    } else {
      // An eager send (point to point) must not wait for the receive a pull waits for.
      const bool pull = peer_pulls_ && !tag.eager && data.size() >= pull_threshold_;
      send_queue_.push_back({&request, tag, data, 0, false, pull});
      outgoing_waiting_.fetch_add(1, std::memory_order_relaxed);
      doorbell = flush_locked();
      queued = !send_queue_.empty();
    }
  }
  if (doorbell) ring_peer_doorbell();
  if (queued) owner_.work_pending();
  if (!error) return;
  owner_.abort(error, LogLevel::debug);
  request.fail(owner_.failure());
}

bool Channel::flush_locked() {
  if (write_broken_) return false;
  bool doorbell = false;
  // Confirmations first: the peer's sends wait on them. Never inside an
  // eager message, whose records must stay together.
  while (!pulled_notes_.empty() && (send_queue_.empty() || !send_queue_.front().started)) {
    const auto [slot, generation] = pulled_notes_.front();
    const PulledNote note{slot, 0, generation};
    if (!out_.try_write(RecordKind::pulled, RecordHeader{}, bytes_of(note))) return doorbell;
    pulled_notes_.pop_front();
    outgoing_waiting_.fetch_sub(1, std::memory_order_relaxed);
    doorbell |= out_.publish();
  }
  while (!send_queue_.empty()) {
    Outgoing& message = send_queue_.front();
    if (message.pull) {
      if (free_slots_.empty()) break;  // until a pulled note frees one
      const uint32_t slot = free_slots_.back();
      const uint64_t generation = next_generation_++;
      // Stored before the offer is published: the peer checks it after copying.
      offered_slots_[slot].store(generation, std::memory_order_release);
      RecordHeader header;
      header.group = message.tag.group;
      header.value = message.tag.value;
      header.signature = message.tag.signature;
      header.total = message.data.size();
      const PullOffer offer{reinterpret_cast<uint64_t>(message.data.data()), slot, 0, generation};
      if (!out_.try_write(RecordKind::pull, header, bytes_of(offer))) {
        offered_slots_[slot].store(0, std::memory_order_release);
        break;
      }
      free_slots_.pop_back();
      awaiting_pull_[slot] = message.request;
      send_queue_.pop_front();
      outgoing_waiting_.fetch_sub(1, std::memory_order_relaxed);
      doorbell |= out_.publish();
      continue;
    }
    const bool finished = write_outgoing_locked(message);
    doorbell |= out_.publish();
    if (!finished) break;
    Request* done = message.request;
    send_queue_.pop_front();
    outgoing_waiting_.fetch_sub(1, std::memory_order_relaxed);
    done->complete();  // its bytes are in the ring: the buffer is the caller's again
  }
  return doorbell;
}

bool Channel::write_outgoing_locked(Outgoing& message) {
  const size_t total = message.data.size();
  while (!message.started || message.written < total) {
    const size_t chunk = std::min(out_.max_payload(), total - message.written);
    RecordHeader header;
    header.group = message.tag.group;
    header.value = message.tag.value;
    header.signature = message.tag.signature;
    header.total = total;
    const RecordKind kind = message.started ? RecordKind::more : RecordKind::message;
    if (!out_.try_write(kind, header, message.data.subspan(message.written, chunk))) return false;
    message.started = true;
    message.written += chunk;
    // Each record is published at once, so the receiver copies one record
    // out while this side copies the next one in.
    if (message.written < total && out_.publish()) ring_peer_doorbell();
  }
  return true;
}

void Channel::ring_peer_doorbell() {
  const uint64_t one = 1;
  // A full counter (EAGAIN) already means "wake up"; a dead peer is the side channel's news.
  [[maybe_unused]] ssize_t written = ::write(peer_doorbell_.get(), &one, sizeof(one));
}

// ---------------------------------------------------------------- receiving

void Channel::post_recv(Request& request, Tag tag, std::span<std::byte> data) {
  post_recv(request, tag, data, false);
}

bool Channel::post_recv(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived) {
  // Pending from here on, except where only_if_arrived finds nothing: then
  // the request must stay idle, so it is marked only once it is taken on.
  if (!only_if_arrived) request.mark_pending();
  std::exception_ptr error;
  bool pull_queued = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (owner_.failed() || failed_) {
      if (only_if_arrived) request.mark_pending();
      request.fail(owner_.failure());
      return true;
    }
    const TagKey key(tag);
    auto message = std::find_if(unexpected_.begin(), unexpected_.end(), [&](const auto& m) {
      return TagKey(m->tag) == key && !m->waiting.request;
    });
    if (message != unexpected_.end()) {
      if (only_if_arrived) request.mark_pending();
      Unexpected& arrived = **message;
      if (arrived.total != data.size() || arrived.tag.signature != tag.signature) {
        error = mismatch_error(arrived.tag, arrived.total, tag, data.size());
      } else if (arrived.pull) {
        pulls_.push_back({&request, data, arrived.address, arrived.slot, arrived.generation, 0});
        pulls_waiting_.fetch_add(1, std::memory_order_release);
        recycle(message);
        pull_queued = true;
      } else if (!arrived.complete) {
        arrived.waiting = {&request, tag, data};
        return true;
      } else {
        if (!data.empty()) std::memcpy(data.data(), arrived.payload.data(), data.size());
        recycle(message);
        request.complete();
        return true;
      }
    }
    if (pull_queued) {
      // reported below, without the lock
    } else if (!error) {
      if (only_if_arrived) return false;
      if (peer_said_goodbye_) {
        error = closed_error(cat(" before sending ", describe_tag(tag.group, tag.value), " that this rank expects"));
      } else {
        posted_.push_back({&request, tag, data});
        return true;
      }
    }
  }
  if (pull_queued) {
    owner_.work_pending();
    return true;
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

bool Channel::progress() {
  // Idle polls (most of them) read three counters and take no lock.
  bool moved = in_.has_records() && consume();
  if (pulls_waiting_.load(std::memory_order_acquire) > 0) moved |= run_pulls();
  if (outgoing_waiting_.load(std::memory_order_relaxed) == 0) return moved;
  bool doorbell = false;
  {
    std::unique_lock<std::mutex> lock(send_mutex_, std::try_to_lock);
    if (lock.owns_lock() && (!send_queue_.empty() || !pulled_notes_.empty()) && !owner_.failed()) {
      const size_t before = send_queue_.size() + pulled_notes_.size();
      doorbell = flush_locked();
      moved |= send_queue_.size() + pulled_notes_.size() != before;
    }
  }
  if (doorbell) ring_peer_doorbell();
  return moved;
}

bool Channel::consume(bool wait_for_lock) {
  if (!receiving_.load(std::memory_order_relaxed)) return false;
  std::unique_lock<std::mutex> lock(consumer_, std::defer_lock);
  if (wait_for_lock) lock.lock();
  else if (!lock.try_lock()) return false;
  bool moved = false;
  bool doorbell = false;
  try {
    while (receiving_.load(std::memory_order_relaxed)) {
      std::optional<RingReader::Record> record = in_.peek();
      if (!record) break;
      moved = true;
      switch (record->header.kind) {
        case RecordKind::message: on_message(*record); break;
        case RecordKind::more: on_more(*record); break;
        case RecordKind::pull: on_pull(*record); break;
        case RecordKind::pulled: on_pulled(*record); break;
        case RecordKind::padding: break;  // peek() skips them
      }
      if (!receiving_.load(std::memory_order_relaxed)) break;
      doorbell |= in_.release();
    }
  } catch (const std::runtime_error& damage) {
    corrupt(cat("a corrupt ring: ", damage.what()));
  }
  lock.unlock();
  if (doorbell) ring_peer_doorbell();
  report_later_failure();
  return moved;
}

void Channel::on_message(const RingReader::Record& record) {
  const RecordHeader& header = record.header;
  if (in_message_) return corrupt("a new message in the middle of another");
  if (header.length > header.total) return corrupt(cat("a message of ", header.total, " bytes whose first record holds ", header.length));
  const Tag tag = tag_of(header);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    auto found = find_posted(tag);
    if (found != posted_.end()) {
      // Left in place when it does not fit: the abort this leads to fails it.
      if (found->buffer.size() != header.total || found->tag.signature != tag.signature)
        return fail_later(mismatch_error(tag, header.total, found->tag, found->buffer.size()));
      incoming_request_ = found->request;
      incoming_target_ = found->buffer.data();
      posted_.erase(found);
    } else if (header.total > owner_.max_unexpected_bytes() - unexpected_bytes_) {
      return fail_later(std::make_exception_ptr(IoError(
          cat("rank ", owner_.rank(), ": ", peer_label_, " sent a message of ", header.total, " bytes (",
              describe_tag(tag.group, tag.value), ") that no receive was posted for, with ", unexpected_bytes_,
              " bytes of such messages from it buffered already: more than the limit of ",
              owner_.max_unexpected_bytes(), " bytes (CHORUS_MAX_UNEXPECTED_BYTES). Post receives before peers "
              "send this much, or raise the limit"),
          peer_rank_)));
    } else {
      Unexpected& message = add_unexpected(tag, header.total);
      message.counted = true;
      unexpected_bytes_ += header.total;
      incoming_unexpected_ = &message;
      incoming_target_ = nullptr;
    }
  }
  // Claimable from now on (post_recv_if_arrived), while the records arrive.
  if (incoming_unexpected_) owner_.arrivals().notify();
  in_message_ = true;
  incoming_tag_ = tag;
  incoming_total_ = header.total;
  incoming_landed_ = 0;
  land(record.payload);
}

void Channel::on_more(const RingReader::Record& record) {
  if (!in_message_) return corrupt("a continuation record outside any message");
  const RecordHeader& header = record.header;
  if (TagKey(tag_of(header)) != TagKey(incoming_tag_) || header.total != incoming_total_)
    return corrupt("a continuation record of another message");
  land(record.payload);
}

void Channel::land(std::span<const std::byte> bytes) {
  if (bytes.size() > incoming_total_ - incoming_landed_)
    return corrupt(cat("more bytes than its message of ", incoming_total_, " announced"));
  if (incoming_request_) {
    if (!bytes.empty()) std::memcpy(incoming_target_ + incoming_landed_, bytes.data(), bytes.size());
  } else {
    // Grows only with bytes that really arrived: a peer announcing a huge
    // message costs this rank nothing until it sends it.
    try {
      incoming_unexpected_->payload.insert(incoming_unexpected_->payload.end(), bytes.begin(), bytes.end());
    } catch (const std::bad_alloc&) {
      return fail_later(std::make_exception_ptr(
          IoError(cat("rank ", owner_.rank(), ": cannot buffer an unexpected message of ", incoming_total_,
                      " bytes from ", peer_label_, ": out of memory"),
                  peer_rank_)));
    }
  }
  incoming_landed_ += bytes.size();
  if (incoming_landed_ == incoming_total_) finish_incoming();
}

void Channel::finish_incoming() {
  in_message_ = false;
  if (Request* done = std::exchange(incoming_request_, nullptr)) {
    incoming_target_ = nullptr;
    done->complete();
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Unexpected* message = std::exchange(incoming_unexpected_, nullptr);
  if (failed_ || !message) return;
  message->complete = true;
  Request* waiting = message->waiting.request;
  if (!waiting) return;
  if (!message->payload.empty())
    std::memcpy(message->waiting.buffer.data(), message->payload.data(), message->payload.size());
  recycle(std::find_if(unexpected_.begin(), unexpected_.end(), [&](const auto& m) { return m.get() == message; }));
  waiting->complete();
}

void Channel::on_pull(const RingReader::Record& record) {
  if (in_message_) return corrupt("a pull offer in the middle of a message");
  if (!we_pull_) return corrupt("a pull offer, though this rank said it cannot read that process's memory");
  PullOffer offer;
  if (record.payload.size() != sizeof(offer)) return corrupt(cat("a pull offer of ", record.payload.size(), " bytes"));
  std::memcpy(&offer, record.payload.data(), sizeof(offer));
  if (offer.slot >= kPullSlots) return corrupt(cat("a pull offer in slot ", offer.slot));
  const RecordHeader& header = record.header;
  const Tag tag = tag_of(header);
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) return;
  auto found = find_posted(tag);
  if (found != posted_.end()) {
    if (found->buffer.size() != header.total || found->tag.signature != tag.signature)
      return fail_later(mismatch_error(tag, header.total, found->tag, found->buffer.size()));
    pulls_.push_back({found->request, found->buffer, offer.address, offer.slot, offer.generation, 0});
    pulls_waiting_.fetch_add(1, std::memory_order_release);
    posted_.erase(found);
    return;
  }
  Unexpected& message = add_unexpected(tag, header.total);
  message.complete = true;
  message.pull = true;
  message.address = offer.address;
  message.slot = offer.slot;
  message.generation = offer.generation;
  owner_.arrivals().notify();  // under mutex_: the notifier takes only its own locks
}

std::vector<Channel::PostedRecv>::iterator Channel::find_posted(const Tag& tag) {
  const TagKey key(tag);
  return std::find_if(posted_.begin(), posted_.end(), [&](const PostedRecv& posted) { return TagKey(posted.tag) == key; });
}

Channel::Unexpected& Channel::add_unexpected(const Tag& tag, uint64_t total) {
  std::unique_ptr<Unexpected> message;
  if (spare_unexpected_.empty()) {
    message = std::make_unique<Unexpected>();
  } else {
    message = std::move(spare_unexpected_.back());
    spare_unexpected_.pop_back();
  }
  message->tag = tag;
  message->total = total;
  unexpected_.push_back(std::move(message));
  return *unexpected_.back();
}

void Channel::recycle(std::deque<std::unique_ptr<Unexpected>>::iterator message) {
  std::unique_ptr<Unexpected> done = std::move(*message);
  unexpected_.erase(message);
  if (done->counted) unexpected_bytes_ -= done->total;
  // Kept for the next one, with its buffer, unless the buffer is large.
  if (spare_unexpected_.size() >= 16 || done->payload.capacity() > (size_t{1} << 20)) return;
  done->payload.clear();
  done->complete = done->pull = done->counted = false;
  done->waiting = {};
  spare_unexpected_.push_back(std::move(done));
}

void Channel::on_pulled(const RingReader::Record& record) {
  PulledNote note;
  if (record.payload.size() != sizeof(note)) return corrupt(cat("a pulled note of ", record.payload.size(), " bytes"));
  std::memcpy(&note, record.payload.data(), sizeof(note));
  Request* done = nullptr;
  {
    std::lock_guard<std::mutex> lock(send_mutex_);
    if (note.slot >= kPullSlots || !awaiting_pull_[note.slot] ||
        offered_slots_[note.slot].load(std::memory_order_relaxed) != note.generation) {
      done = nullptr;
    } else {
      done = std::exchange(awaiting_pull_[note.slot], nullptr);
      offered_slots_[note.slot].store(0, std::memory_order_release);
      free_slots_.push_back(note.slot);
    }
  }
  if (!done) return corrupt(cat("a pulled note for slot ", note.slot, " that holds no such offer"));
  done->complete();
}

// ---------------------------------------------------------------- pulls

bool Channel::run_pulls() {
  std::unique_lock<std::mutex> lock(puller_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  bool moved = false;
  while (true) {
    Pull* pull = nullptr;
    {
      std::lock_guard<std::mutex> receive_lock(mutex_);
      if (failed_ || pulls_.empty()) break;
      pull = &pulls_.front();  // only this thread removes entries: the reference stays valid
    }
    moved = true;
    std::exception_ptr error = finish_pull(*pull);
    if (error) {
      fail_later(error);
      break;
    }
    if (pull->copied < pull->destination.size()) break;  // the device failed meanwhile
    // The copy happened while the offer stood, so the bytes are the message.
    Request* done = pull->request;
    const uint32_t slot = pull->slot;
    const uint64_t generation = pull->generation;
    {
      std::lock_guard<std::mutex> receive_lock(mutex_);
      pulls_.pop_front();
      pulls_waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
    bool doorbell = false;
    {
      std::lock_guard<std::mutex> send_lock(send_mutex_);
      pulled_notes_.emplace_back(slot, generation);
      outgoing_waiting_.fetch_add(1, std::memory_order_relaxed);
      doorbell = flush_locked();
    }
    if (doorbell) ring_peer_doorbell();
    done->complete();
  }
  lock.unlock();
  report_later_failure();
  return moved;
}

std::exception_ptr Channel::finish_pull(Pull& pull) {
  const size_t total = pull.destination.size();
  // A withdrawn offer means the sender aborted, and its reason (or, if it
  // died, the end of the side channel) is on its way: that is what this rank
  // should report, not the withdrawal. Left pending (copied stays short of
  // total) until it comes, or the grace passes.
  constexpr auto kReasonGrace = std::chrono::seconds(1);
  if (pull.withdrawn_at != Clock::time_point{}) {
    if (Clock::now() - pull.withdrawn_at < kReasonGrace) return nullptr;
    return std::make_exception_ptr(
        IoError(cat("rank ", owner_.rank(), ": ", peer_label_, " withdrew a message of ", total,
                    " bytes while this rank was copying it (it aborted, and its reason did not follow)"),
                peer_rank_));
  }
  while (pull.copied < total) {
    if (owner_.failed()) return nullptr;
    const size_t chunk = std::min(kPullChunk, total - pull.copied);
    iovec local{pull.destination.data() + pull.copied, chunk};
    iovec remote{reinterpret_cast<void*>(pull.address + pull.copied), chunk};
    const ssize_t copied = ::process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0);
    if (copied <= 0) {
      const int error = copied < 0 ? errno : EIO;
      if (error == EINTR) continue;
      return std::make_exception_ptr(IoError(
          cat("rank ", owner_.rank(), ": cannot copy a message of ", total, " bytes out of ", peer_label_, " (",
              errno_text(error), error == ESRCH ? ": the process is gone" : "", ")"),
          peer_rank_));
    }
    pull.copied += static_cast<size_t>(copied);
  }
  // Dekker with the sender withdrawing its offer: copy, fence, check. The
  // copy is the kernel's, so the fence orders it in hardware terms only.
  // ThreadSanitizer sees neither the copy nor fences (g++ refuses
  // std::atomic_thread_fence under it: -Wtsan); its builds check without.
#if !defined(__SANITIZE_THREAD__)
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  if (peer_slots_[pull.slot].load(std::memory_order_acquire) != pull.generation) {
    pull.copied = 0;
    pull.withdrawn_at = Clock::now();
  }
  return nullptr;
}

// ---------------------------------------------------------------- sleeping

bool Channel::arm_doorbells() {
  if (owner_.failed()) return true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pulls_.empty()) return false;
  }
  if (in_.request_data_doorbell()) return false;
  std::lock_guard<std::mutex> lock(send_mutex_);
  if (send_queue_.empty() && pulled_notes_.empty()) return true;
  if (!send_queue_.empty() && send_queue_.front().pull && free_slots_.empty()) return true;  // a pulled note wakes us
  return !out_.request_space_doorbell(out_.max_payload());
}

void Channel::disarm_doorbells() { in_.cancel_data_doorbell(); }

// ---------------------------------------------------------------- side channel and failure

bool Channel::on_side_readable() {
  std::vector<std::byte> message;
  std::vector<Fd> fds;
  while (true) {
    const ssize_t received = receive_side(side_.get(), message, fds, 0);
    if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (received <= 0) {
      receiving_.store(false, std::memory_order_relaxed);
      bool expected;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        expected = failed_ || peer_said_goodbye_;
      }
      if (expected || owner_.shutting_down()) return true;
      const std::string how = received < 0 ? errno_text(errno) : "end of stream";
      fail_later(std::make_exception_ptr(PeerLostError(
          cat("rank ", owner_.rank(), ": connection to ", peer_label_, " closed by the peer (", how,
              ": its process exited or was killed without closing its context)"),
          peer_rank_)));
      report_later_failure();
      return true;
    }
    SideKind kind{};
    std::string why = check_side_message(message, kind);
    if (why.empty() && kind == SideKind::goodbye) {
      // Whatever it sent before its goodbye is in the ring already.
      consume(/*wait_for_lock=*/true);
      size_t pending;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        peer_said_goodbye_ = true;
        peer_gone_.store(true, std::memory_order_release);
      }
      pending = pending_requests();
      CHORUS_LOG(debug, owner_.rank(), "shm: ", peer_label_, " closed its context");
      if (pending > 0)
        fail_later(closed_error(cat(" while ", pending, " requests with it were pending")), LogLevel::debug);
    } else if (why.empty() && kind == SideKind::abort) {
      AbortNote note;
      why = decode_abort(message, note);
      if (why.empty())
        fail_later(adopt_abort(note.error_class, note.blamed_rank, note.text, owner_.rank(), peer_rank_));
    } else if (why.empty() && (kind == SideKind::probe || kind == SideKind::probe_answer)) {
      ProbeNote note;
      why = decode_probe(message, note);
      if (why.empty() && kind == SideKind::probe) {
        note.position = owner_.position_in(note.group);
        send_side(side_.get(), encode_probe(SideKind::probe_answer, note));
      } else if (why.empty()) {
        // The position first: whoever sees the probe answered may read it.
        position_answer_.record(note.number, note.group, note.position);
        uint64_t known = answered_probe_.load(std::memory_order_relaxed);
        while (note.number > known &&
               !answered_probe_.compare_exchange_weak(known, note.number, std::memory_order_acq_rel)) {
        }
      }
    } else if (why.empty()) {
      why = cat("a handshake message after the handshake");
    }
    if (!why.empty()) corrupt(cat("a side-channel message that is not ours (", why, ")"));
    report_later_failure();
  }
}

void Channel::fail_later(std::exception_ptr reason, LogLevel level) {
  receiving_.store(false, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(later_mutex_);
  if (later_failure_) return;  // the first error is the one to report
  later_failure_ = std::move(reason);
  later_level_ = level;
}

void Channel::report_later_failure() {
  std::exception_ptr error;
  LogLevel level;
  {
    std::lock_guard<std::mutex> lock(later_mutex_);
    error = std::exchange(later_failure_, nullptr);
    level = later_level_;
  }
  if (error) owner_.abort(error, level);
}

void Channel::corrupt(const std::string& what) {
  fail_later(std::make_exception_ptr(IoError(
      cat("rank ", owner_.rank(), ": ", peer_label_, " sent ", what, " (corrupt memory, or not a chorus peer of this job)"),
      peer_rank_)));
}

std::exception_ptr Channel::mismatch_error(const Tag& theirs, uint64_t their_bytes, const Tag& mine,
                                           size_t my_bytes) const {
  return transport::mismatch_error(owner_.rank(), peer_rank_, owner_.describe_signature(theirs.signature),
                                   owner_.describe_signature(mine.signature), mine, their_bytes, my_bytes);
}

std::exception_ptr Channel::closed_error(const std::string& detail) const {
  return closed_context_error(owner_.rank(), peer_rank_, detail);
}

size_t Channel::pending_requests() {
  std::lock_guard<std::mutex> consumer(consumer_);
  std::lock_guard<std::mutex> send_lock(send_mutex_);
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_requests_locked();
}

size_t Channel::pending_requests_locked() const {
  size_t pending = incoming_request_ ? 1 : 0;
  pending += send_queue_.size() + pulls_.size();
  for (Request* request : awaiting_pull_) pending += request ? 1 : 0;
  pending += posted_.size();
  for (const auto& message : unexpected_) pending += message->waiting.request ? 1 : 0;
  return pending;
}

void Channel::fail_everything(std::exception_ptr error, std::span<const std::byte> abort_message) {
  std::vector<Request*> doomed;
  bool tell_peer = false;
  {
    // In this order everywhere; taking them waits out any copy into a user buffer.
    std::lock_guard<std::mutex> consumer(consumer_);
    std::lock_guard<std::mutex> puller(puller_);
    std::lock_guard<std::mutex> send_lock(send_mutex_);
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    failed_ = true;
    receiving_.store(false, std::memory_order_relaxed);
    tell_peer = !abort_message.empty() && !peer_said_goodbye_;
    for (const Outgoing& message : send_queue_) doomed.push_back(message.request);
    send_queue_.clear();
    pulled_notes_.clear();
    outgoing_waiting_.store(0, std::memory_order_relaxed);
    // Withdraw every offer before the buffers go back to the application: a
    // peer still copying one sees it and fails instead of keeping the bytes.
    for (uint32_t slot = 0; slot < kPullSlots; ++slot) {
      offered_slots_[slot].store(0, std::memory_order_seq_cst);
      if (awaiting_pull_[slot]) doomed.push_back(std::exchange(awaiting_pull_[slot], nullptr));
    }
    for (const PostedRecv& posted : posted_) doomed.push_back(posted.request);
    posted_.clear();
    for (const auto& message : unexpected_)
      if (message->waiting.request) doomed.push_back(message->waiting.request);
    unexpected_.clear();
    unexpected_bytes_ = 0;
    for (const Pull& pull : pulls_) doomed.push_back(pull.request);
    pulls_.clear();
    pulls_waiting_.store(0, std::memory_order_relaxed);
    if (incoming_request_) doomed.push_back(std::exchange(incoming_request_, nullptr));
    incoming_unexpected_ = nullptr;
    incoming_target_ = nullptr;
    write_broken_ = true;
  }
  for (Request* request : doomed) request->fail(error);
  if (tell_peer) send_side(side_.get(), abort_message);
}

void Channel::send_probe(uint64_t probe, uint64_t group) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || peer_said_goodbye_ || we_said_goodbye_) return;
  }
  // A full socket buffer or a dead peer leaves the probe unanswered, which is the answer.
  send_side(side_.get(), encode_probe(SideKind::probe, {.number = probe, .group = group}));
}

void Channel::send_goodbye() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || peer_said_goodbye_ || we_said_goodbye_) return;
    we_said_goodbye_ = true;
  }
  send_side(side_.get(), encode_goodbye());
}

}  // namespace chorus::transport::shm
