// The slots of stream_flags.h.
#include "memory/cuda/stream_flags.h"

#include "base/error.h"

namespace chorus::cuda {

StreamFlags::StreamFlags(Allocate allocate, Release release, size_t slots_per_block)
    : allocate_(std::move(allocate)), release_(std::move(release)), per_block_(slots_per_block) {
  if (per_block_ == 0) throw InvalidArgument("StreamFlags needs at least one slot per block");
}

StreamFlags::~StreamFlags() {
  for (uint32_t* block : blocks_) release_(block);
}

StreamFlags::Ticket StreamFlags::take() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) {
    uint32_t* block = allocate_(per_block_);
    const size_t first = blocks_.size() * per_block_;
    blocks_.push_back(block);
    generation_.resize(first + per_block_, 0);
    // Taken lowest first: a job with few collectives in flight keeps
    // reusing the same few slots.
    for (size_t slot = first + per_block_; slot-- > first;) free_.push_back(slot);
  }
  const size_t slot = free_.back();
  free_.pop_back();
  Ticket ticket;
  ticket.slot = slot;
  ticket.flag = blocks_[slot / per_block_] + slot % per_block_;
  ticket.value = ++generation_[slot];
  return ticket;
}

void StreamFlags::release(const Ticket& ticket) {
  // The GPU reads the flag while we write it: an atomic store is one aligned
  // 32-bit write, which the stream's wait sees whole, after the results.
  std::atomic_ref<uint32_t>(*ticket.flag).store(ticket.value, std::memory_order_release);
  std::lock_guard lock(mutex_);
  free_.push_back(ticket.slot);
}

size_t StreamFlags::slots() const {
  std::lock_guard lock(mutex_);
  return blocks_.size() * per_block_;
}

size_t StreamFlags::in_use() const {
  std::lock_guard lock(mutex_);
  return blocks_.size() * per_block_ - free_.size();
}

}  // namespace chorus::cuda
