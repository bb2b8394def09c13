// Little-endian stores and loads, independent of the host's byte order:
// what every wire encoder (tcp frames, verbs messages, addresses) uses so
// ranks on any host agree.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus {

inline void store_le(std::byte* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}
inline uint64_t load_le(const std::byte* in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

}  // namespace chorus
