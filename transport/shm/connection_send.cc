// One shared-memory peer's sending side (connection.h): eager messages into
// the outgoing ring, pull offers for large ones, the notes that confirm the
// peer's pulls, and the doorbell.
#include "transport/shm/connection.h"

#include <unistd.h>

#include <algorithm>

#include "base/error.h"
#include "transport/peer_errors.h"

namespace chorus::transport::shm {
namespace {

template <class T>
std::span<const std::byte> bytes_of(const T& value) {
  return {reinterpret_cast<const std::byte*>(&value), sizeof(T)};
}

}  // namespace

// ---------------------------------------------------------------- sending

void Connection::post_send(Request& request, Tag tag, std::span<const std::byte> data) {
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
      const bool pull = pull_locked(tag, data.size());
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

bool Connection::pull_locked(const Tag& tag, size_t bytes) {
  // An eager send (point to point) must not wait for the receive a pull waits for.
  if (!peer_pulls_ || tag.eager) {
    eager_bytes_sent_ += bytes;
    return false;
  }
  if (bytes >= pull_threshold_) return true;
  if (past_eager_window(eager_bytes_sent_, peer_claimed_->load(std::memory_order_acquire), bytes, eager_window_))
    return true;
  eager_bytes_sent_ += bytes;
  return false;
}

bool Connection::flush_locked() {
  if (write_broken_) return false;
  bool doorbell = false;
  size_t budget = kFlushBudgetRings * segment_.ring_bytes();
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
    const bool finished = write_outgoing_locked(message, budget);
    doorbell |= out_.publish();
    if (!finished) break;
    Request* done = message.request;
    send_queue_.pop_front();
    outgoing_waiting_.fetch_sub(1, std::memory_order_relaxed);
    done->complete();  // its bytes are in the ring: the buffer is the caller's again
  }
  return doorbell;
}

bool Connection::write_outgoing_locked(Outgoing& message, size_t& budget) {
  const size_t total = message.data.size();
  while (!message.started || message.written < total) {
    // An abort waiting for this lock, or the budget spent: the rest later.
    if (message.started && (budget == 0 || owner_.failed())) return false;
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
    budget -= std::min(budget, chunk);
    // Each record is published at once, so the receiver copies one record
    // out while this side copies the next one in.
    if (message.written < total && out_.publish()) ring_peer_doorbell();
  }
  return true;
}

void Connection::ring_peer_doorbell() {
  const uint64_t one = 1;
  // A full counter (EAGAIN) already means "wake up"; a dead peer is the side channel's news.
  [[maybe_unused]] ssize_t written = ::write(peer_doorbell_.get(), &one, sizeof(one));
}

}  // namespace chorus::transport::shm
