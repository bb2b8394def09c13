// What a memory kind other than host memory gives the layers above it: the
// API checks where a caller's buffers live and orders the call against the
// caller's stream, the algorithms stage small calls through host memory,
// the transports that move host memory only (host staging) copy through
// pinned chunks, and the executor reduces with the kind's backend. Each
// kind implements this once, in its own folder (memory/cuda/), and is found
// by its MemoryKind in memory/registry.h: nothing above names the kind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "base/deadline.h"
#include "base/memory.h"
#include "memory/memory_backend.h"

namespace chorus {

// What the kind's driver says a pointer is.
enum class PointerKind : uint8_t {
  host,     // ordinary or pinned host memory: the host can read it
  device,   // memory of one device (an allocation, a pool, an IPC mapping)
  managed,  // unified memory: chorus does not move it (which side holds a page is the driver's choice)
};

struct PointerInfo {
  PointerKind kind = PointerKind::host;
  int device = -1;  // for device and managed memory
};

// Ordering of one collective against the caller's stream (a queue of the
// kind's own: a CUDA stream). Made on the issuing thread; the thread that
// runs the collective calls inputs_ready() before touching its buffers and
// finished() after (memory/cuda/runtime.h says how CUDA keeps it).
class StreamOrder {
 public:
  virtual ~StreamOrder() = default;
  // Returns once the caller's work queued before the issue is done; a
  // TimeoutError (saying what it waited for) once `deadline` passes first.
  virtual void inputs_ready(const Deadline& deadline) = 0;
  // The collective ended (well or not): the caller's stream may go on.
  virtual void finished() = 0;
};

class MemoryKindSupport {
 public:
  virtual ~MemoryKindSupport() = default;
  // "CUDA": how messages name the kind's own concepts ("CUDA managed memory").
  virtual std::string_view display_name() const = 0;
  virtual PointerInfo describe(const void* pointer) = 0;
  // The backend moving and reducing memory of `device` (InvalidArgument
  // for a device this process does not have).
  virtual MemoryBackend& backend(int device) = 0;
  // At least `bytes` of pinned host memory for the calling thread's staged
  // collective; reused by its next one.
  virtual std::byte* staging_buffer(size_t bytes) = 0;
  // Pinned host memory of the caller's own (free it with free_pinned).
  virtual std::byte* allocate_pinned(size_t bytes) = 0;
  virtual void free_pinned(std::byte* data) = 0;
  // Copies between memory of `device` and host memory; each returns once
  // the bytes are there. copy() takes either direction (or device to device).
  virtual void copy_to_host(std::byte* host, const std::byte* device_memory, size_t bytes, int device) = 0;
  virtual void copy_to_device(std::byte* device_memory, const std::byte* host, size_t bytes, int device) = 0;
  virtual void copy(std::byte* to, const std::byte* from, size_t bytes, int device) = 0;
  // `stream` is the caller's stream (null: the kind's default); `async`
  // says whether the issuing call returns before the collective ends.
  virtual std::unique_ptr<StreamOrder> order_on_stream(void* stream, int device, bool async) = 0;
  // Processes that share a device by time slices take turns of it, and
  // each one's queued work waits for its own turn (CUDA without MPS): an
  // algorithm that has one process do the device work beats one where every
  // process waits for its turn. An id of the calling thread's current
  // device, the same in every process that uses that device, when its
  // processes take turns of it; 0 when they run side by side (MPS) or the
  // kind cannot say. Asked once, at connect (transport/connect_mesh.cc).
  virtual uint64_t time_sliced_device() { return 0; }
};

}  // namespace chorus
