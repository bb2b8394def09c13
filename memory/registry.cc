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

thread_local MemoryBackend* host_substitute = nullptr;  // ScopedHostBackend

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
  if (memory.on_host()) return host_substitute ? *host_substitute : host_memory_backend();
  return memory_kind_support(memory.kind).backend(memory.device);
}

ScopedHostBackend::ScopedHostBackend(MemoryBackend& backend) : previous_(host_substitute) {
  host_substitute = &backend;
}

ScopedHostBackend::~ScopedHostBackend() { host_substitute = previous_; }

std::vector<MemoryKind> built_device_kinds() {
  std::vector<MemoryKind> kinds;
  for (const KindEntry& entry : kind_table)
    if (entry.built) kinds.push_back(entry.kind);
  return kinds;
}

}  // namespace chorus
