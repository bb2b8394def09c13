// HMAC-SHA256 over OpenSSL libcrypto's SHA-256; the challenges from the
// kernel's CSPRNG (getrandom), which costs a system call where OpenSSL's
// generator costs milliseconds to set up in every process, and every rank is
// a fresh process that connects once.
//
// Why not OpenSSL's HMAC() or EVP_MAC: in OpenSSL 3 those fetch their
// algorithm from a provider, and the first fetch in a process costs about
// 1.1 ms here. Every rank paid it at connect, and with 16 ranks on a
// 2-core host that was about 30 ms of a 55 ms job connect. The SHA256_*
// functions run the same SHA-256 without a fetch (0.015 ms for the first
// call); OpenSSL 3 deprecates them but keeps them, so this file alone says
// OPENSSL_SUPPRESS_DEPRECATED. HMAC itself is RFC 2104's two nested hashes
// (hmac_sha256 below), checked against RFC 4231's vectors and against
// OpenSSL's HMAC() in test/core/test_job_secret.cc.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "base/job_secret.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include <cstdint>
#include <vector>

#include "base/error.h"
#include "base/log.h"

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

// OpenSSL 3 reads its configuration file on first use, which costs each
// fresh rank process milliseconds; HMAC needs none of it.
void initialize_crypto_once() {
  static const bool initialized = OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) == 1;
  (void)initialized;
}

}  // namespace

Proof hmac_sha256(std::span<const std::byte> key, std::span<const std::byte> message) {
  initialize_crypto_once();
  constexpr size_t kBlockBytes = SHA256_CBLOCK;  // 64
  unsigned char block_key[kBlockBytes] = {};
  if (key.size() > kBlockBytes)
    SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), block_key);
  else if (!key.empty())
    std::memcpy(block_key, key.data(), key.size());
  unsigned char pad[kBlockBytes];
  unsigned char inner[SHA256_DIGEST_LENGTH];
  Proof proof{};
  SHA256_CTX context;
  for (size_t i = 0; i < kBlockBytes; ++i) pad[i] = block_key[i] ^ 0x36;
  SHA256_Init(&context);
  SHA256_Update(&context, pad, kBlockBytes);
  SHA256_Update(&context, message.data(), message.size());
  SHA256_Final(inner, &context);
  for (size_t i = 0; i < kBlockBytes; ++i) pad[i] = block_key[i] ^ 0x5c;
  SHA256_Init(&context);
  SHA256_Update(&context, pad, kBlockBytes);
  SHA256_Update(&context, inner, sizeof(inner));
  SHA256_Final(reinterpret_cast<unsigned char*>(proof.data()), &context);
  OPENSSL_cleanse(block_key, sizeof(block_key));
  OPENSSL_cleanse(pad, sizeof(pad));
  OPENSSL_cleanse(&context, sizeof(context));
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
  return CRYPTO_memcmp(expected.data(), claimed.data(), kProofBytes) == 0;
}

}  // namespace chorus
