// The host memory backend.
#include "memory/host/host_memory.h"

#include <cstring>

#include "base/reduce.h"

namespace chorus {
namespace {

class HostMemoryBackend final : public MemoryBackend {
 public:
  Memory memory() const override { return Memory::host(); }

  std::byte* thread_scratch(size_t bytes) override {
    thread_local std::unique_ptr<std::byte[]> buffer;
    thread_local size_t capacity = 0;
    if (bytes > capacity) {
      buffer.reset();
      buffer.reset(new std::byte[bytes]);
      capacity = bytes;
    }
    return buffer.get();
  }

  std::shared_ptr<std::byte> allocate(size_t bytes) override {
    return std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
  }

  void copy(std::byte* to, const std::byte* from, size_t bytes) override {
    if (bytes > 0 && to != from) std::memmove(to, from, bytes);
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
