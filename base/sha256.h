// SHA-256 (FIPS 180-4), the hash under every handshake proof (job_secret.h).
//
// Ours rather than libcrypto's: the proofs are all the hashing chorus does,
// and linking libcrypto for them cost every rank process about 1 ms at exec
// (the loader relocating a 4.5 MB library) before it did anything; at 16
// ranks on 2 cores that was a tenth of the job's connect time
// (benchmarks/README.md, "Trust and survival"). A handshake hashes a few
// hundred bytes, so a plain implementation is as fast as it needs to be.
// Checked against FIPS 180-4's examples and against libcrypto in
// test/core/test_job_secret.cc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace chorus {

class Sha256 {
 public:
  static constexpr size_t kDigestBytes = 32;
  static constexpr size_t kBlockBytes = 64;
  using Digest = std::array<std::byte, kDigestBytes>;

  Sha256();
  void update(std::span<const std::byte> bytes);
  // Pads, returns the digest; the object is spent afterwards.
  Digest finish();

  static Digest of(std::span<const std::byte> bytes) {
    Sha256 hash;
    hash.update(bytes);
    return hash.finish();
  }

 private:
  void compress(const std::byte* block);

  std::array<uint32_t, 8> state_;
  std::array<std::byte, kBlockBytes> pending_{};
  size_t pending_bytes_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace chorus
