// Where a buffer lives. Every buffer a collective receives carries one: host
// memory, or memory of one device of a kind chorus supports (CUDA). What a
// kind can do lives in its folder, memory/<kind>/, found by the kind
// (memory/registry.h); each transport declares which kinds it moves.
#pragma once

#include <cstdint>
#include <string>

namespace chorus {

enum class MemoryKind : uint8_t { host, cuda };

struct Memory {
  MemoryKind kind = MemoryKind::host;
  int device = -1;  // the CUDA device index; -1 for host memory

  static constexpr Memory host() { return {}; }
  static constexpr Memory cuda(int device) { return {MemoryKind::cuda, device}; }
  constexpr bool on_host() const { return kind == MemoryKind::host; }
  friend constexpr bool operator==(const Memory&, const Memory&) = default;
};

// "host", "cuda:0"
std::string to_string(const Memory& memory);

}  // namespace chorus
