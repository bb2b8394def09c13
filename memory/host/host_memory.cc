// The host memory backend.
#include "memory/host/host_memory.h"

#include <cstring>

#include "base/copy.h"
#include "base/long_lived_memory.h"
#include "base/reduce.h"

namespace chorus {
namespace {

// One thread's scratch: long-lived memory (base/long_lived_memory.h), so a
// transport that pins memory may keep it pinned from call to call. It is
// retired before it is freed, when it grows and when the thread exits.
class ThreadScratch {
 public:
  ThreadScratch() = default;
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  ~ThreadScratch() { release(); }

  std::byte* at_least(size_t bytes) {
    if (bytes > capacity_) {
      release();
      buffer_.reset(new std::byte[bytes]);
      capacity_ = bytes;
      long_lived_memory::announce({buffer_.get(), capacity_});
    }
    return buffer_.get();
  }

 private:
  void release() {
    if (!buffer_) return;
    long_lived_memory::retire({buffer_.get(), capacity_});
    buffer_.reset();
    capacity_ = 0;
  }

  std::unique_ptr<std::byte[]> buffer_;
  size_t capacity_ = 0;
};

class HostMemoryBackend final : public MemoryBackend {
 public:
  Memory memory() const override { return Memory::host(); }

  std::byte* thread_scratch(size_t bytes) override {
    thread_local ThreadScratch scratch;
    return scratch.at_least(bytes);
  }

  std::shared_ptr<std::byte> allocate(size_t bytes) override {
    return std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
  }

  void copy(std::byte* to, const std::byte* from, size_t bytes) override {
    if (bytes == 0 || to == from) return;
    // memmove where the ranges overlap; copy_bytes (base/copy.h) otherwise.
    if (to + bytes <= from || from + bytes <= to)
      copy_bytes(to, from, bytes);
    else
      std::memmove(to, from, bytes);
  }

  void reduce(DataType type, ReduceOp op, std::byte* accumulator, const std::byte* operand, size_t count) override {
    reduce_unchecked(type, op, accumulator, operand, count);
  }

  void average(DataType type, std::byte* data, size_t count, size_t ranks) override {
    average_unchecked(type, data, count, ranks);
  }
};

}  // namespace

MemoryBackend& host_memory_backend() {
  static HostMemoryBackend host;
  return host;
}

}  // namespace chorus
