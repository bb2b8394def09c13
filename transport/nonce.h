// A nonzero 64-bit word from the system's random source: what a device
// publishes so that a peer can tell this incarnation of a rank from an
// earlier one at the same address (zero stands for "none" on the wire).
#pragma once

#include <cstdint>
#include <random>

namespace chorus::transport {

inline uint64_t random_nonce() {
  std::random_device source;
  uint64_t nonce = 0;
  while (nonce == 0) nonce = (static_cast<uint64_t>(source()) << 32) ^ source();
  return nonce;
}

}  // namespace chorus::transport
