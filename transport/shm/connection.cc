// One shared-memory peer (connection.h): construction and receiving; sending
// is in connection_send.cc, pulls and sleeping in connection_pulls.cc, the
// side channel and failure in connection_failure.cc.
#include "transport/shm/connection.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/copy.h"
#include "base/error.h"
#include "transport/abort_report.h"
#include "transport/peer_errors.h"
#include "transport/receive_matching.h"
#include "transport/shm/side_channel.h"

namespace chorus::transport::shm {
namespace {

// A message's or pull's tag, as its first record carries it.
Tag tag_of(const RecordHeader& header) { return {header.value, header.signature, header.group}; }

}  // namespace

Connection::Connection(ConnectionOwner& owner, ConnectionSetup setup)
    : owner_(owner),
      peer_rank_(setup.peer_rank),
      peer_pid_(setup.peer_pid),
      peer_label_(cat("shared-memory peer rank ", setup.peer_rank, " (pid ", setup.peer_pid, ")")),
      side_(std::move(setup.side)),
      peer_doorbell_(std::move(setup.peer_doorbell)),
      segment_(std::move(setup.segment)),
      peer_pulls_(setup.peer_pulls),
      we_pull_(setup.we_pull),
      pull_threshold_(setup.pull_threshold),
      eager_window_(setup.eager_window) {
  // Direction 0 carries the listener's messages, 1 the dialer's.
  const int outgoing = setup.listener ? 0 : 1;
  const int incoming = 1 - outgoing;
  out_ = RingWriter(segment_.control(outgoing), segment_.ring(outgoing), segment_.ring_bytes());
  in_ = RingReader(segment_.control(incoming), segment_.ring(incoming), segment_.ring_bytes());
  offered_slots_ = segment_.pull_slots(outgoing);
  peer_claimed_ = &segment_.control(outgoing)->eager_bytes_claimed;
  we_claimed_ = &segment_.control(incoming)->eager_bytes_claimed;
  peer_slots_ = segment_.pull_slots(incoming);
  for (uint32_t slot = kPullSlots; slot > 0; --slot) free_slots_.push_back(slot - 1);
  // Both processes hold the memory mapped: the descriptor has done its job.
  segment_.close_fd();
}

// ---------------------------------------------------------------- receiving

void Connection::post_recv(Request& request, Tag tag, std::span<std::byte> data) {
  post_recv(request, tag, data, false);
}

bool Connection::post_recv(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived) {
  mark_pending_unless_only_if_arrived(request, only_if_arrived);
  ReceivePosting posting;
  bool pull_queued = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posting = post_receive_locked(
        matching_, owner_, peer_rank_, owner_.failed() || failed_, peer_said_goodbye_, request, tag, data,
        only_if_arrived, [&](Unexpected& arrived, const PostedReceive& receive) {
          if (arrived.pull) {
            pulls_.push_back({&request, data, arrived.address, arrived.slot, arrived.generation, 0});
            pulls_waiting_.fetch_add(1, std::memory_order_release);
            matching_.remove(arrived);
            pull_queued = true;
          } else if (!arrived.complete) {
            arrived.claimant = receive;
            claimed_eager(arrived.bytes);
          } else {
            if (!data.empty()) copy_bytes(data.data(), arrived.payload.data(), data.size());
            claimed_eager(arrived.bytes);
            matching_.remove(arrived);
            request.complete();
          }
        });
  }
  if (pull_queued) owner_.work_pending();
  return finish_posting(posting, owner_, peer_rank_, request, tag);
}

std::optional<Tag> Connection::find_unclaimed(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return matching_.find_unclaimed(group, oldest, wanted);
}

bool Connection::progress() {
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

bool Connection::consume(bool wait_for_lock) {
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

void Connection::on_message(const RingReader::Record& record) {
  const RecordHeader& header = record.header;
  if (in_message_) return corrupt("a new message in the middle of another");
  if (header.length > header.total) return corrupt(cat("a message of ", header.total, " bytes whose first record holds ", header.length));
  const Tag tag = tag_of(header);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    const auto match = match_arrival_locked(matching_, owner_, peer_rank_, peer_label_, tag, header.total, header.total);
    if (match.error) return fail_later(match.error);
    if (match.receive.request) {
      incoming_request_ = match.receive.request;
      incoming_target_ = match.receive.buffer.data();
      claimed_eager(header.total);
    } else {
      incoming_unexpected_ = match.kept;
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

void Connection::on_more(const RingReader::Record& record) {
  if (!in_message_) return corrupt("a continuation record outside any message");
  const RecordHeader& header = record.header;
  if (TagKey(tag_of(header)) != TagKey(incoming_tag_) || header.total != incoming_total_)
    return corrupt("a continuation record of another message");
  land(record.payload);
}

void Connection::land(std::span<const std::byte> bytes) {
  if (bytes.size() > incoming_total_ - incoming_landed_)
    return corrupt(cat("more bytes than its message of ", incoming_total_, " announced"));
  if (incoming_request_) {
    if (!bytes.empty()) copy_bytes(incoming_target_ + incoming_landed_, bytes.data(), bytes.size());
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

void Connection::finish_incoming() {
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
  if (!message->claimed()) return;
  const PostedReceive receive = message->claimant;
  if (!message->payload.empty()) copy_bytes(receive.buffer.data(), message->payload.data(), message->payload.size());
  matching_.remove(*message);
  receive.request->complete();
}

void Connection::on_pull(const RingReader::Record& record) {
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
  // An offer holds no bytes here: it charges nothing against the limit.
  const auto match = match_arrival_locked(matching_, owner_, peer_rank_, peer_label_, tag, header.total, 0);
  if (match.error) return fail_later(match.error);
  if (match.receive.request) {
    pulls_.push_back({match.receive.request, match.receive.buffer, offer.address, offer.slot, offer.generation, 0});
    pulls_waiting_.fetch_add(1, std::memory_order_release);
    return;
  }
  Unexpected& message = *match.kept;
  message.complete = true;
  message.pull = true;
  message.address = offer.address;
  message.slot = offer.slot;
  message.generation = offer.generation;
  owner_.arrivals().notify();  // under mutex_: the notifier takes only its own locks
}

void Connection::on_pulled(const RingReader::Record& record) {
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

}  // namespace chorus::transport::shm
