// The job secret's HMAC-SHA256 (base/job_secret.cc computes it from
// SHA-256 itself, to skip OpenSSL's provider fetch): RFC 4231's test
// vectors, and agreement with OpenSSL's own HMAC() for keys and messages of
// every length around the 64-byte block.
#include <catch2/catch.hpp>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/job_secret.h"

namespace {

std::vector<std::byte> bytes_of(const std::string& text) {
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  return {data, data + text.size()};
}

std::vector<std::byte> repeated(uint8_t value, size_t count) { return std::vector<std::byte>(count, std::byte{value}); }

std::string hex(const chorus::Proof& proof) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (std::byte b : proof) {
    out += digits[std::to_integer<unsigned>(b) >> 4];
    out += digits[std::to_integer<unsigned>(b) & 15];
  }
  return out;
}

}  // namespace

TEST_CASE("hmac_sha256 gives RFC 4231's results", "[job_secret]") {
  // Test cases 1, 2, 3, 6 and 7 of RFC 4231 (6 and 7: keys longer than a block).
  CHECK(hex(chorus::hmac_sha256(repeated(0x0b, 20), bytes_of("Hi There"))) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(chorus::hmac_sha256(bytes_of("Jefe"), bytes_of("what do ya want for nothing?"))) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex(chorus::hmac_sha256(repeated(0xaa, 20), repeated(0xdd, 50))) ==
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  CHECK(hex(chorus::hmac_sha256(repeated(0xaa, 131),
                                bytes_of("Test Using Larger Than Block-Size Key - Hash Key First"))) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(hex(chorus::hmac_sha256(
            repeated(0xaa, 131),
            bytes_of("This is a test using a larger than block-size key and a larger than block-size data. The key "
                     "needs to be hashed before being used by the HMAC algorithm."))) ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST_CASE("hmac_sha256 agrees with OpenSSL's HMAC() at every length around a block", "[job_secret]") {
  std::mt19937_64 random(4231);
  for (size_t key_bytes : {0, 1, 31, 32, 63, 64, 65, 127, 128, 200}) {
    for (size_t message_bytes : {0, 1, 55, 56, 63, 64, 65, 119, 120, 1000}) {
      std::vector<std::byte> key(key_bytes), message(message_bytes);
      for (auto& b : key) b = static_cast<std::byte>(random());
      for (auto& b : message) b = static_cast<std::byte>(random());
      chorus::Proof expected{};
      unsigned int length = 0;
      static const unsigned char no_key = 0;
      const auto* key_data = key.empty() ? &no_key : reinterpret_cast<const unsigned char*>(key.data());
      REQUIRE(HMAC(EVP_sha256(), key_data, static_cast<int>(key.size()),
                   reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                   reinterpret_cast<unsigned char*>(expected.data()), &length) != nullptr);
      REQUIRE(length == expected.size());
      INFO("key " << key_bytes << " bytes, message " << message_bytes << " bytes");
      REQUIRE(chorus::hmac_sha256(key, message) == expected);
    }
  }
}
