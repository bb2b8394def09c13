// Memory descriptions.
#include "base/memory.h"

#include "base/log.h"

namespace chorus {

std::string to_string(const Memory& memory) {
  switch (memory.kind) {
    case MemoryKind::host: return "host";
    case MemoryKind::cuda: return cat("cuda:", memory.device);
  }
  return cat("memory kind ", static_cast<int>(memory.kind));
}

}  // namespace chorus
