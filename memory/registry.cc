// The table of memory kinds: the one place outside memory/<kind>/ that
// names a concrete kind other than host memory.
#include "memory/registry.h"

#include "base/error.h"
#include "base/log.h"
#include "memory/cuda/runtime.h"
#include "memory/host/host_memory.h"

namespace chorus {
namespace {

struct KindEntry {
  MemoryKind kind;
  // Loads the kind's support on first use; throws InvalidArgument saying
  // why it cannot (not built, module missing).
  MemoryKindSupport& (*support)();
  bool built;  // this build was made with the kind's toolkit
};

MemoryKindSupport& cuda_support() { return cuda::cuda_runtime(); }

thread_local MemoryBackend* substitute = nullptr;  // ScopedMemoryBackend

const KindEntry kind_table[] = {
    {MemoryKind::cuda, cuda_support, CHORUS_HAVE_CUDA != 0},
};

}  // namespace

MemoryKindSupport& memory_kind_support(MemoryKind kind) {
  for (const KindEntry& entry : kind_table)
    if (entry.kind == kind) return entry.support();
  throw InvalidArgument(cat("no support in this build for memory kind ", static_cast<int>(kind)));
}

MemoryBackend& memory_backend(const Memory& memory) {
  if (substitute) return *substitute;
  if (memory.on_host()) return host_memory_backend();
  return memory_kind_support(memory.kind).backend(memory.device);
}

ScopedMemoryBackend::ScopedMemoryBackend(MemoryBackend& backend) : previous_(substitute) { substitute = &backend; }

ScopedMemoryBackend::~ScopedMemoryBackend() { substitute = previous_; }

std::vector<MemoryKind> built_device_kinds() {
  std::vector<MemoryKind> kinds;
  for (const KindEntry& entry : kind_table)
    if (entry.built) kinds.push_back(entry.kind);
  return kinds;
}

}  // namespace chorus
