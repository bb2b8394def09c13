// The shared ring (see ring.h for the protocol).
#include "transport/shm/ring.h"

#include <cstring>
#include <stdexcept>

#include "base/copy.h"
#include "base/log.h"

namespace chorus::transport::shm {
namespace {

bool is_power_of_two(size_t value) { return value != 0 && (value & (value - 1)) == 0; }

}  // namespace

RingWriter::RingWriter(RingControl* control, std::byte* data, size_t capacity)
    : control_(control), data_(data), capacity_(capacity), max_payload_(capacity / 4 - kRecordHeaderBytes) {
  if (!is_power_of_two(capacity) || capacity < 4 * kCacheLine * 4)
    throw std::invalid_argument("shm ring: the capacity must be a power of two of at least 1 KiB");
  head_ = published_ = control_->head.load(std::memory_order_relaxed);
}

bool RingWriter::fits(size_t payload) const {
  const size_t needed = record_bytes(payload);
  // seq_cst: the second half of request_space_doorbell's Dekker (acquire otherwise).
  const uint64_t tail = control_->tail.load(std::memory_order_seq_cst);
  const size_t used = static_cast<size_t>(head_ - tail);
  const size_t offset = static_cast<size_t>(head_ & (capacity_ - 1));
  const size_t to_end = capacity_ - offset;
  // A record that would cross the end needs the padding up to it as well.
  const size_t with_padding = needed <= to_end ? needed : to_end + needed;
  return used + with_padding <= capacity_;
}

bool RingWriter::try_write(RecordKind kind, RecordHeader header, std::span<const std::byte> payload) {
  if (payload.size() > max_payload_ || !fits(payload.size())) return false;
  const size_t needed = record_bytes(payload.size());
  size_t offset = static_cast<size_t>(head_ & (capacity_ - 1));
  if (capacity_ - offset < needed) {
    RecordHeader padding;
    padding.kind = RecordKind::padding;
    padding.sequence = sequence_++;
    std::memcpy(data_ + offset, &padding, sizeof(padding));
    head_ += capacity_ - offset;
    offset = 0;
  }
  header.kind = kind;
  header.sequence = sequence_++;
  header.length = payload.size();
  std::memcpy(data_ + offset, &header, sizeof(header));
  if (!payload.empty()) copy_bytes(data_ + offset + kRecordHeaderBytes, payload.data(), payload.size());
  head_ += needed;
  return true;
}

bool RingWriter::publish() {
  if (head_ == published_) return false;
  published_ = head_;
  // Dekker with the consumer's request_data_doorbell: publish, then read its
  // flag, both seq_cst (ring.h).
  control_->head.store(head_, std::memory_order_seq_cst);
  if (control_->consumer_wants_doorbell.load(std::memory_order_seq_cst) == 0) return false;
  // Only the first publish after the consumer went to sleep rings.
  return control_->consumer_wants_doorbell.exchange(0, std::memory_order_acq_rel) != 0;
}

bool RingWriter::request_space_doorbell(size_t payload) {
  control_->producer_wants_doorbell.store(1, std::memory_order_seq_cst);
  if (!fits(std::min(payload, max_payload_))) return false;
  control_->producer_wants_doorbell.store(0, std::memory_order_relaxed);
  return true;
}

RingReader::RingReader(RingControl* control, const std::byte* data, size_t capacity)
    : control_(control), data_(data), capacity_(capacity) {
  if (!is_power_of_two(capacity) || capacity < 4 * kCacheLine * 4)
    throw std::invalid_argument("shm ring: the capacity must be a power of two of at least 1 KiB");
  tail_ = control_->tail.load(std::memory_order_relaxed);
}

bool RingReader::empty() const { return control_->head.load(std::memory_order_acquire) == tail_; }

std::optional<RingReader::Record> RingReader::peek() {
  while (true) {
    const uint64_t head = control_->head.load(std::memory_order_acquire);
    if (head == tail_) return std::nullopt;
    const size_t available = static_cast<size_t>(head - tail_);
    if (available > capacity_ || available < kRecordHeaderBytes)
      throw std::runtime_error(cat("the ring's head (", head, ") and tail (", tail_, ") are ", available,
                                   " bytes apart in a ring of ", capacity_));
    const size_t offset = static_cast<size_t>(tail_ & (capacity_ - 1));
    Record record;
    std::memcpy(&record.header, data_ + offset, sizeof(RecordHeader));
    const RecordHeader& header = record.header;
    if (header.sequence != sequence_)
      throw std::runtime_error(cat("record #", sequence_, " carries number ", header.sequence));
    if (header.kind == RecordKind::padding) {
      const size_t to_end = capacity_ - offset;
      if (to_end > available) throw std::runtime_error("a padding record runs past the published bytes");
      ++sequence_;
      tail_ += to_end;
      // Released together with the next record (or by the next release()).
      continue;
    }
    if (header.kind < RecordKind::message || header.kind > RecordKind::pulled)
      throw std::runtime_error(cat("record #", sequence_, " has unknown kind ", static_cast<uint32_t>(header.kind)));
    if (header.length > capacity_ - offset - kRecordHeaderBytes || record_bytes(header.length) > available)
      throw std::runtime_error(cat("record #", sequence_, " claims ", header.length,
                                   " payload bytes, more than the ring holds"));
    record.payload = {data_ + offset + kRecordHeaderBytes, static_cast<size_t>(header.length)};
    peeked_bytes_ = record_bytes(header.length);
    return record;
  }
}

bool RingReader::release() {
  tail_ += peeked_bytes_;
  if (peeked_bytes_ > 0) ++sequence_;
  peeked_bytes_ = 0;
  // Dekker with the producer's request_space_doorbell (ring.h).
  control_->tail.store(tail_, std::memory_order_seq_cst);
  if (control_->producer_wants_doorbell.load(std::memory_order_seq_cst) == 0) return false;
  return control_->producer_wants_doorbell.exchange(0, std::memory_order_acq_rel) != 0;
}

bool RingReader::request_data_doorbell() {
  control_->consumer_wants_doorbell.store(1, std::memory_order_seq_cst);
  // The shared tail, not tail_: callers arm from any thread, without the lock
  // under which another thread may be consuming (ring.h). A stale tail only
  // reads as records still there, a wake-up too many.
  if (control_->head.load(std::memory_order_seq_cst) == control_->tail.load(std::memory_order_relaxed)) return false;
  control_->consumer_wants_doorbell.store(0, std::memory_order_relaxed);
  return true;
}

void RingReader::cancel_data_doorbell() {
  // Only when set: every collective cancels, and a store would pull the
  // line the producer reads on every publish away from it for nothing.
  if (control_->consumer_wants_doorbell.load(std::memory_order_relaxed) != 0)
    control_->consumer_wants_doorbell.store(0, std::memory_order_relaxed);
}

}  // namespace chorus::transport::shm
