// Flags a caller's CUDA stream waits on (cuStreamWaitValue32) until an
// async collective ends: one slot per collective in flight, in pinned host
// memory the GPU can read.
//
// A slot is handed back as soon as its collective ends, before the stream
// has necessarily passed its wait, and that is safe because a slot's value
// only grows: each use waits for "at least the next generation" and ending
// writes that generation. A stream still waiting on an earlier use of the
// slot sees a value at least as large as the one it waits for, so it is
// released, never blocked by the slot's next user, and the next user's wait
// is not released by the earlier ending. (The driver compares cyclically,
// so even the wrap at 2^32 uses is harmless.)
//
// Host logic only: the memory comes from an allocator the caller gives
// (pinned, mapped host memory in the CUDA runtime; plain memory in tests).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace chorus::cuda {

class StreamFlags {
 public:
  // Returns memory for `count` flags (zeroed); called when every slot is in use.
  using Allocate = std::function<uint32_t*(size_t count)>;
  using Release = std::function<void(uint32_t*)>;

  StreamFlags(Allocate allocate, Release release, size_t slots_per_block = 1024);
  ~StreamFlags();
  StreamFlags(const StreamFlags&) = delete;
  StreamFlags& operator=(const StreamFlags&) = delete;

  struct Ticket {
    uint32_t* flag = nullptr;  // what the stream reads
    uint32_t value = 0;        // what it waits for (at least)
    size_t slot = 0;
  };
  // A slot and the value to wait for.
  Ticket take();
  // The collective ended: the stream may pass, the slot may be reused.
  void release(const Ticket& ticket);

  size_t slots() const;
  size_t in_use() const;

 private:
  Allocate allocate_;
  Release release_;
  const size_t per_block_;
  mutable std::mutex mutex_;
  std::vector<uint32_t*> blocks_;
  std::vector<uint32_t> generation_;  // per slot: the value its last use waited for
  std::vector<size_t> free_;
};

}  // namespace chorus::cuda
