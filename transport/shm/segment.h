// The memory two ranks share: a header, one ring per direction (transport/
// shm/ring.h) and one table of pull slots per direction. It is an anonymous
// memfd that the listening rank creates and hands to the dialer over their
// unix socket (SCM_RIGHTS): it has no name anywhere, so a crash at any
// moment leaves nothing in /dev/shm, and the kernel frees it when the last
// of the two processes unmaps it.
//
// Pull slots make single-copy transfers safe against a sender that gives up:
// before announcing a message the receiver is to copy out of its memory
// (process_vm_readv), the sender stores the pull's generation in a slot; it
// clears the slot when the receiver says it is done, or when it aborts,
// before its buffer goes back to the application. The receiver checks the
// slot after copying: still the same generation means the copy finished
// while the buffer was the sender's to give, so the bytes are the message.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/shm/ring.h"
#include "transport/file_descriptor.h"

namespace chorus::transport::shm {

inline constexpr size_t kPullSlots = 64;

class Segment {
 public:
  Segment() = default;
  // A new memfd of the layout for rings of `ring_bytes`, mapped.
  static Segment create(size_t ring_bytes, int rank);
  // Maps a segment a peer created, checking its header and size against
  // `ring_bytes` before trusting any offset. Throws std::runtime_error.
  static Segment open(Fd fd, size_t ring_bytes);
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int fd() const { return fd_.get(); }
  // Direction 0 carries the listener's messages, 1 the dialer's.
  RingControl* control(int direction) const;
  std::byte* ring(int direction) const;
  std::atomic<uint64_t>* pull_slots(int direction) const;
  size_t ring_bytes() const { return ring_bytes_; }
  // Stops sharing the memory this process holds (the mapping stays).
  void close_fd() { fd_.reset(); }

 private:
  Fd fd_;
  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  size_t ring_bytes_ = 0;
};

}  // namespace chorus::transport::shm
