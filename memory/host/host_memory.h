// Host memory's backend: the executor's scratch, copies and reductions
// with the host kernels (base/reduce.h).
#pragma once

#include "memory/memory_backend.h"

namespace chorus {

MemoryBackend& host_memory_backend();

}  // namespace chorus
