#include "chorus/registered_buffer.h"

#include <cstdint>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "base/long_lived_memory.h"

namespace chorus {
namespace {

MemoryRange range_of(const void* data, size_t bytes) { return {static_cast<const std::byte*>(data), bytes}; }

}  // namespace

RegisteredBuffer register_buffer(const void* data, size_t bytes) {
  if (data == nullptr) throw InvalidArgument("register_buffer: the buffer is a null pointer");
  if (bytes == 0) throw InvalidArgument(cat("register_buffer: the buffer at ", data, " has 0 bytes"));
  if (bytes > UINTPTR_MAX - reinterpret_cast<uintptr_t>(data))
    throw InvalidArgument(cat("register_buffer: ", bytes, " bytes from ", data, " run past the end of the address space"));
  long_lived_memory::announce(range_of(data, bytes));
  return RegisteredBuffer(data, bytes);
}

RegisteredBuffer::RegisteredBuffer(RegisteredBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

RegisteredBuffer& RegisteredBuffer::operator=(RegisteredBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

RegisteredBuffer::~RegisteredBuffer() { reset(); }

void RegisteredBuffer::reset() {
  if (bytes_ == 0) return;
  long_lived_memory::retire(range_of(data_, bytes_));
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace chorus
