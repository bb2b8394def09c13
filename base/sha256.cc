#include "base/sha256.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace chorus {
namespace {

// The first 32 bits of the fractional parts of the cube roots of the first
// 64 primes (FIPS 180-4, 4.2.2).
constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// The first 32 bits of the fractional parts of the square roots of the
// first 8 primes (5.3.3).
constexpr std::array<uint32_t, 8> kInitialState = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

uint32_t load_big_endian(const std::byte* bytes) {
  return (uint32_t(bytes[0]) << 24) | (uint32_t(bytes[1]) << 16) | (uint32_t(bytes[2]) << 8) | uint32_t(bytes[3]);
}

void store_big_endian(uint32_t value, std::byte* bytes) {
  for (int i = 0; i < 4; ++i) bytes[i] = std::byte(value >> (24 - 8 * i));
}

}  // namespace

Sha256::Sha256() : state_(kInitialState) {}

void Sha256::compress(const std::byte* block) {
  std::array<uint32_t, 64> schedule;
  for (size_t t = 0; t < 16; ++t) schedule[t] = load_big_endian(block + 4 * t);
  for (size_t t = 16; t < 64; ++t) {
    const uint32_t w15 = schedule[t - 15], w2 = schedule[t - 2];
    const uint32_t sigma0 = std::rotr(w15, 7) ^ std::rotr(w15, 18) ^ (w15 >> 3);
    const uint32_t sigma1 = std::rotr(w2, 17) ^ std::rotr(w2, 19) ^ (w2 >> 10);
    schedule[t] = schedule[t - 16] + sigma0 + schedule[t - 7] + sigma1;
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (size_t t = 0; t < 64; ++t) {
    const uint32_t big_sigma1 = std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25);
    const uint32_t choose = (e & f) ^ (~e & g);
    const uint32_t t1 = h + big_sigma1 + choose + kRoundConstants[t] + schedule[t];
    const uint32_t big_sigma0 = std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22);
    const uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = big_sigma0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::update(std::span<const std::byte> bytes) {
  total_bytes_ += bytes.size();
  size_t offset = 0;
  if (pending_bytes_ > 0) {
    const size_t take = std::min(bytes.size(), kBlockBytes - pending_bytes_);
    std::memcpy(pending_.data() + pending_bytes_, bytes.data(), take);
    pending_bytes_ += take;
    offset = take;
    if (pending_bytes_ < kBlockBytes) return;
    compress(pending_.data());
    pending_bytes_ = 0;
  }
  for (; bytes.size() - offset >= kBlockBytes; offset += kBlockBytes) compress(bytes.data() + offset);
  pending_bytes_ = bytes.size() - offset;
  if (pending_bytes_ > 0) std::memcpy(pending_.data(), bytes.data() + offset, pending_bytes_);
}

Sha256::Digest Sha256::finish() {
  // A 1 bit, zeros up to 8 bytes short of a block boundary, then the message
  // length in bits, big-endian (5.1.1).
  const uint64_t total_bits = total_bytes_ * 8;
  std::array<std::byte, kBlockBytes + 8> padding{};
  padding[0] = std::byte{0x80};
  const size_t used = pending_bytes_;
  const size_t zeros_and_marker = used < 56 ? 56 - used : 120 - used;
  for (int i = 0; i < 8; ++i) padding[zeros_and_marker + i] = std::byte(total_bits >> (56 - 8 * i));
  update(std::span(padding.data(), zeros_and_marker + 8));
  Digest digest;
  for (size_t i = 0; i < state_.size(); ++i) store_big_endian(state_[i], digest.data() + 4 * i);
  return digest;
}

}  // namespace chorus
