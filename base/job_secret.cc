// HMAC-SHA256 comes from OpenSSL's libcrypto; the challenges from the
// kernel's CSPRNG (getrandom), which costs a system call where OpenSSL's
// generator costs milliseconds to set up in every process, and every rank is
// a fresh process that connects once.
#include "base/job_secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
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

Proof JobSecret::prove(std::string_view purpose, std::span<const std::span<const std::byte>> parts) const {
  initialize_crypto_once();
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
