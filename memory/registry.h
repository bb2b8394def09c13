// The memory kinds this build knows, found by their MemoryKind. Adding a
// kind means its folder (memory/<kind>/, implementing kind_support.h), its
// public name in base/memory.h, and one line of the table in registry.cc.
#pragma once

#include <vector>

#include "base/memory.h"
#include "memory/kind_support.h"
#include "memory/memory_backend.h"

namespace chorus {

// The backend for `memory`: host memory's own, or the kind's for that
// device. Throws InvalidArgument naming the memory when this build or
// process cannot serve it (no support built, module missing, no such device).
MemoryBackend& memory_backend(const Memory& memory);

// For tests of the layers above, where no device runs them: while one
// lives, memory_backend() on the calling thread returns `backend`, for host
// and device memory alike. test/algorithms/test_stream_ordered.cc puts the
// executor's stream-ordered path on host memory whose copies and
// reductions run late, on a thread of their own, as a device's stream runs
// them; test/cuda/ runs Plans over cuda_ipc with host memory playing the
// device.
class ScopedMemoryBackend {
 public:
  explicit ScopedMemoryBackend(MemoryBackend& backend);
  ~ScopedMemoryBackend();
  ScopedMemoryBackend(const ScopedMemoryBackend&) = delete;
  ScopedMemoryBackend& operator=(const ScopedMemoryBackend&) = delete;

 private:
  MemoryBackend* previous_;
};

// The support of a kind other than host memory; throws InvalidArgument
// saying why when this build or process has none (the kind's module could
// not be loaded, or it was not built).
MemoryKindSupport& memory_kind_support(MemoryKind kind);

// The kinds other than host memory this build was made with: transports
// that move host memory only stage these through host memory.
std::vector<MemoryKind> built_device_kinds();

}  // namespace chorus
