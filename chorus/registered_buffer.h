// A caller's host buffer that chorus may keep pinned between calls.
//
// Verbs devices without on-demand paging (Soft-RoCE, most NICs without
// mlx5's ODP) must pin memory before the NIC touches it. chorus pins its own
// buffers once, but a caller's buffer it pins for every message and unpins
// after: nothing tells it when the caller frees the memory, and a pin kept
// past free() would let the NIC read and write the old pages once a new
// buffer appears at the same address, a silent wrong answer. Pinning costs
// microseconds to milliseconds per message (docs/ibverbs.md).
//
// A buffer the caller reuses call after call (a framework's gradient
// buckets, a benchmark's arrays) can say so here, as NCCL's
// ncclCommRegister does: while the handle lives, each verbs device pins the
// whole buffer on its first message through it and keeps the pin; dropping
// the handle unpins it on every device before returning. The caller's side
// of the contract: the memory stays allocated while the handle lives, and
// no collective is using it when the handle goes.
//
// Registration is per process, not per Context: every Context's transports
// see it, including those created later. Transports that need no pin (tcp,
// shared memory, CUDA IPC) ignore it, and so is registering device memory
// useless (it travels through chorus's own staging buffers, which are pinned
// once already). The same buffer may be registered more than once (each
// handle counts); a range that overlaps a registered one without being
// exactly it is refused.
#pragma once

#include <cstddef>

namespace chorus {

class RegisteredBuffer {
 public:
  RegisteredBuffer() = default;
  RegisteredBuffer(RegisteredBuffer&& other) noexcept;
  RegisteredBuffer& operator=(RegisteredBuffer&& other) noexcept;
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;
  // Deregisters: every pin of the buffer is gone when it returns.
  ~RegisteredBuffer();

  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool registered() const { return bytes_ != 0; }
  // Deregisters now (the destructor's work); then registered() is false.
  void reset();

 private:
  friend RegisteredBuffer register_buffer(const void* data, size_t bytes);
  RegisteredBuffer(const void* data, size_t bytes) : data_(data), bytes_(bytes) {}

  const void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Registers [data, data + bytes). Throws InvalidArgument for a null pointer,
// zero bytes, a range that wraps the address space, or one that overlaps a
// registered range without being exactly it (the message names both).
[[nodiscard]] RegisteredBuffer register_buffer(const void* data, size_t bytes);

}  // namespace chorus
