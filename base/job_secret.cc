// HMAC-SHA256 (RFC 2104: two nested hashes) over our SHA-256
// (base/sha256.h says why not libcrypto's); the challenges from the kernel's
// CSPRNG (getrandom), one system call per challenge. Checked against
// RFC 4231's vectors and against OpenSSL's HMAC() in
// test/core/test_job_secret.cc.
#include "base/job_secret.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include <cstdint>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/sha256.h"

namespace chorus {
namespace {

void append_with_length(std::vector<unsigned char>& out, std::span<const std::byte> part) {
  const uint64_t length = part.size();
  for (int shift = 0; shift < 64; shift += 8) out.push_back(static_cast<unsigned char>(length >> shift));
  const auto* bytes = reinterpret_cast<const unsigned char*>(part.data());
  out.insert(out.end(), bytes, bytes + part.size());
}

}  // namespace

Challenge fresh_challenge() {
  Challenge challenge{};
  size_t filled = 0;
  while (filled < challenge.size()) {
    const ssize_t got = ::getrandom(challenge.data() + filled, challenge.size() - filled, 0);
    if (got > 0) {
      filled += static_cast<size_t>(got);
    } else if (got < 0 && errno != EINTR) {
      throw IoError(cat("cannot draw a random handshake challenge: getrandom: ", std::strerror(errno)));
    }
  }
  return challenge;
}

JobSecret::JobSecret(std::string key) : key_(std::move(key)) {}

namespace {

// Overwrites key material in a way the compiler may not drop as a dead store.
void wipe(void* data, size_t bytes) {
  volatile unsigned char* p = static_cast<volatile unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) p[i] = 0;
}

}  // namespace

Proof hmac_sha256(std::span<const std::byte> key, std::span<const std::byte> message) {
  constexpr size_t kBlockBytes = Sha256::kBlockBytes;
  std::array<std::byte, kBlockBytes> block_key{};
  if (key.size() > kBlockBytes) {
    const Sha256::Digest hashed_key = Sha256::of(key);
    std::memcpy(block_key.data(), hashed_key.data(), hashed_key.size());
  } else if (!key.empty()) {
    std::memcpy(block_key.data(), key.data(), key.size());
  }
  std::array<std::byte, kBlockBytes> pad;
  for (size_t i = 0; i < kBlockBytes; ++i) pad[i] = block_key[i] ^ std::byte{0x36};
  Sha256 inner;
  inner.update(pad);
  inner.update(message);
  const Sha256::Digest inner_digest = inner.finish();
  for (size_t i = 0; i < kBlockBytes; ++i) pad[i] = block_key[i] ^ std::byte{0x5c};
  Sha256 outer;
  outer.update(pad);
  outer.update(inner_digest);
  const Sha256::Digest digest = outer.finish();
  Proof proof;
  std::memcpy(proof.data(), digest.data(), proof.size());
  wipe(block_key.data(), block_key.size());
  wipe(pad.data(), pad.size());
  return proof;
}

Proof JobSecret::prove(std::string_view purpose, std::span<const std::span<const std::byte>> parts) const {
  std::vector<unsigned char> transcript;
  append_with_length(transcript, std::as_bytes(std::span(purpose.data(), purpose.size())));
  for (std::span<const std::byte> part : parts) append_with_length(transcript, part);
  return hmac_sha256(std::as_bytes(std::span(key_.data(), key_.size())), std::as_bytes(std::span(transcript)));
}

bool JobSecret::verify(std::span<const std::byte> claimed, std::string_view purpose,
                       std::span<const std::span<const std::byte>> parts) const {
  if (claimed.size() != kProofBytes) return false;
  const Proof expected = prove(purpose, parts);
  // Constant time: every byte is compared, whatever the first difference.
  unsigned char difference = 0;
  for (size_t i = 0; i < kProofBytes; ++i)
    difference |= static_cast<unsigned char>(expected[i] ^ claimed[i]);
  return difference == 0;
}

}  // namespace chorus
