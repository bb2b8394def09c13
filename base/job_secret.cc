// HMAC-SHA256 and the random source come from OpenSSL's libcrypto.
#include "base/job_secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>
#include <vector>

#include "base/error.h"

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
  if (RAND_bytes(reinterpret_cast<unsigned char*>(challenge.data()), static_cast<int>(challenge.size())) != 1)
    throw IoError("cannot draw a random handshake challenge: OpenSSL's random source failed");
  return challenge;
}

JobSecret::JobSecret(std::string key) : key_(std::move(key)) {}

Proof JobSecret::prove(std::string_view purpose, std::span<const std::span<const std::byte>> parts) const {
  std::vector<unsigned char> transcript;
  append_with_length(transcript, std::as_bytes(std::span(purpose.data(), purpose.size())));
  for (std::span<const std::byte> part : parts) append_with_length(transcript, part);
  Proof proof{};
  unsigned int length = 0;
  // An empty key is valid for HMAC; a null pointer is not accepted for it by every version.
  static const unsigned char no_key = 0;
  const unsigned char* key = key_.empty() ? &no_key : reinterpret_cast<const unsigned char*>(key_.data());
  if (HMAC(EVP_sha256(), key, static_cast<int>(key_.size()), transcript.data(), transcript.size(),
           reinterpret_cast<unsigned char*>(proof.data()), &length) == nullptr ||
      length != proof.size())
    throw IoError("cannot compute a handshake proof: OpenSSL's HMAC-SHA256 failed");
  return proof;
}

bool JobSecret::verify(std::span<const std::byte> claimed, std::string_view purpose,
                       std::span<const std::span<const std::byte>> parts) const {
  if (claimed.size() != kProofBytes) return false;
  const Proof expected = prove(purpose, parts);
  return CRYPTO_memcmp(expected.data(), claimed.data(), kProofBytes) == 0;
}

}  // namespace chorus
