// The job secret and the proofs of knowing it.
//
// Every connection a job accepts (TCP pairs, the shared-memory side channel,
// TcpStore clients) runs the same challenge-response before anything else:
// the accepting side sends a fresh random challenge, the connecting side
// answers with its own challenge and an HMAC-SHA256 over both challenges and
// what it claims (its rank, ...), keyed by the secret; the accepting side
// checks it and proves itself back over the same transcript. Fresh
// challenges from both sides make a recorded handshake worthless on another
// connection, and the proof binds the claims, so no field can be swapped.
//
// Without a configured secret the same exchange runs with an empty key: the
// wire and the code path stay one, but the proofs only show that both ends
// speak chorus (the job is unauthenticated; connect() warns when it spans
// hosts). CHORUS_SECRET or CHORUS_SECRET_FILE configure one (base/config.h).
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace chorus {

inline constexpr size_t kChallengeBytes = 16;
inline constexpr size_t kProofBytes = 32;
using Challenge = std::array<std::byte, kChallengeBytes>;
using Proof = std::array<std::byte, kProofBytes>;

// HMAC-SHA256 (RFC 2104) of `message` under `key`; what every proof is.
Proof hmac_sha256(std::span<const std::byte> key, std::span<const std::byte> message);

// kChallengeBytes from the operating system's random source. Throws IoError
// if it has none (never silently weaker).
Challenge fresh_challenge();

class JobSecret {
 public:
  JobSecret() = default;  // not configured
  explicit JobSecret(std::string key);

  bool configured() const { return !key_.empty(); }

  // HMAC-SHA256 keyed by the secret over `purpose` and `parts`, each
  // prefixed by its length so that no two different transcripts hash alike.
  // The purpose names the message ("tcp hello", "store server"), so a proof
  // made for one message is never accepted as another.
  Proof prove(std::string_view purpose, std::span<const std::span<const std::byte>> parts) const;
  Proof prove(std::string_view purpose, std::initializer_list<std::span<const std::byte>> parts) const {
    return prove(purpose, std::span(parts.begin(), parts.size()));
  }
  // Compares in constant time.
  bool verify(std::span<const std::byte> claimed, std::string_view purpose,
              std::span<const std::span<const std::byte>> parts) const;
  bool verify(std::span<const std::byte> claimed, std::string_view purpose,
              std::initializer_list<std::span<const std::byte>> parts) const {
    return verify(claimed, purpose, std::span(parts.begin(), parts.size()));
  }

 private:
  std::string key_;
};

}  // namespace chorus
