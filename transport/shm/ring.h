// A single-producer, single-consumer ring of records in memory shared by two
// processes: one direction of one pair of ranks.
//
// The control block keeps the producer's head and the consumer's tail on
// cache lines of their own, so the two sides never write the same line.
// Both are byte counts that only grow; a record starts at (count mod
// capacity). A record is a 64-byte header and its payload, padded to 64
// bytes, and never wraps: when it does not fit before the end, a padding
// record fills the rest and the record starts over at 0. The producer writes
// the whole record, then publishes it by storing the new head with release
// ordering; the consumer loads the head with acquire ordering before reading
// anything, so what it reads is complete. The consumer stores the tail with
// release ordering once it no longer needs a record's bytes.
//
// The two wake-up flags are how a side that is about to sleep asks the other
// for a doorbell (an eventfd write) when the ring changes: the consumer when
// it wants new records, the producer when it waits for space. Each side
// stores its flag, then looks at the ring once more; the other side
// publishes, then reads the flag. All four accesses are seq_cst, so one of
// the two always sees the other (Dekker) and no wake-up is lost. (No
// fences: seq_cst operations cost no more, and ThreadSanitizer, which does
// not model fences, understands them.)
//
// The peer's process writes this memory: nothing in it is trusted. The
// consumer copies each header out before checking it (the peer cannot change
// it between the check and the use), checks the record's running number,
// kind and lengths against the ring before touching a byte, and reports a
// corrupt ring instead of reading outside it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace chorus::transport::shm {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kRecordHeaderBytes = 64;

struct alignas(kCacheLine) RingControl {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};  // producer: bytes published
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};  // consumer: bytes released
  alignas(kCacheLine) std::atomic<uint32_t> consumer_wants_doorbell{0};
  alignas(kCacheLine) std::atomic<uint32_t> producer_wants_doorbell{0};
  // Consumer: bytes of this ring's eager messages that a posted receive has
  // taken (counted as it takes them), so the producer can tell how much of
  // what it sent waits unclaimed at the consumer (Connection's eager window).
  // Only ever a hint: a hostile peer can make this side pull, never read
  // or write out of bounds.
  alignas(kCacheLine) std::atomic<uint64_t> eager_bytes_claimed{0};
};
static_assert(sizeof(RingControl) == 5 * kCacheLine);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

enum class RecordKind : uint32_t {
  padding = 1,     // fills the ring up to its end; no payload
  message = 2,     // the start of a message: tag, total length, first bytes
  more = 3,        // further bytes of the message in progress
  pull = 4,        // a message the receiver copies itself (process_vm_readv)
  pulled = 5,      // the receiver finished copying a pulled message
};

struct RecordHeader {
  RecordKind kind = RecordKind::padding;
  uint32_t reserved = 0;
  uint64_t sequence = 0;   // the record's number on this ring, from 0
  uint64_t group = 0;      // message, pull: the tag
  uint64_t value = 0;
  uint64_t signature = 0;
  uint64_t total = 0;      // message, pull: the message's length
  uint64_t length = 0;     // bytes of payload in this record
  uint64_t argument = 0;   // pull: the sender's address; pulled: the pull's slot and generation
};
static_assert(sizeof(RecordHeader) == kRecordHeaderBytes);

// The payload of a `pull` record: where the sender's message lies, and the
// pull slot (segment.h) that keeps it valid.
struct PullOffer {
  uint64_t address = 0;
  uint32_t slot = 0;
  uint32_t reserved = 0;
  uint64_t generation = 0;
};
// The payload of a `pulled` record: the slot the receiver is done with.
struct PulledNote {
  uint32_t slot = 0;
  uint32_t reserved = 0;
  uint64_t generation = 0;
};

// Bytes a record of `payload` bytes occupies.
inline constexpr size_t record_bytes(size_t payload) {
  return kRecordHeaderBytes + (payload + kCacheLine - 1) / kCacheLine * kCacheLine;
}

// The producer's side. Not thread-safe: its owner serialises writers.
class RingWriter {
 public:
  RingWriter() = default;
  RingWriter(RingControl* control, std::byte* data, size_t capacity);

  // Largest payload one record may carry.
  size_t max_payload() const { return max_payload_; }
  // Appends a record (header fields but kind, sequence and length come from
  // the caller) if it fits now; returns false, touching nothing visible,
  // when the consumer has not freed enough space yet.
  bool try_write(RecordKind kind, RecordHeader header, std::span<const std::byte> payload);
  // Makes what try_write appended visible to the consumer; returns whether
  // the consumer asked for a doorbell (the caller rings it).
  bool publish();
  // Asks the consumer for a doorbell once it frees space, then returns
  // whether space appeared meanwhile (then the caller must not sleep).
  bool request_space_doorbell(size_t payload);
  bool fits(size_t payload) const;

 private:
  RingControl* control_ = nullptr;
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
  size_t max_payload_ = 0;
  uint64_t head_ = 0;      // written, maybe not yet published
  uint64_t published_ = 0;
  uint64_t sequence_ = 0;
};

// The consumer's side. Not thread-safe: its owner serialises readers, but
// for request_data_doorbell, cancel_data_doorbell and has_records, which read
// only the shared control block and may run beside a reader in any thread.
class RingReader {
 public:
  RingReader() = default;
  RingReader(RingControl* control, const std::byte* data, size_t capacity);

  struct Record {
    RecordHeader header;                  // a private copy, already checked
    std::span<const std::byte> payload;   // in the ring: valid until release()
  };
  // The next record, or nullopt when none is published. Throws
  // std::runtime_error describing the damage when the ring is corrupt.
  std::optional<Record> peek();
  // Done with the record peek() returned; returns whether the producer asked
  // for a doorbell (the caller rings it).
  bool release();
  // Asks the producer for a doorbell on the next record, then returns
  // whether one appeared meanwhile or is not yet released (then the caller
  // must not sleep).
  bool request_data_doorbell();
  void cancel_data_doorbell();
  bool empty() const;
  // Whether records are published and not released, from the shared
  // counters alone: safe from any thread, without the reader's lock.
  bool has_records() const {
    return control_->head.load(std::memory_order_acquire) != control_->tail.load(std::memory_order_relaxed);
  }

 private:
  RingControl* control_ = nullptr;
  const std::byte* data_ = nullptr;
  size_t capacity_ = 0;
  uint64_t tail_ = 0;
  uint64_t sequence_ = 0;
  size_t peeked_bytes_ = 0;  // of the record peek() returned, 0 if none
};

}  // namespace chorus::transport::shm
