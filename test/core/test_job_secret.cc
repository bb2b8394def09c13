// Our SHA-256 (base/sha256.h) and the job secret's HMAC-SHA256 over it:
// FIPS 180-4's and RFC 4231's test vectors, and agreement with OpenSSL's
// libcrypto (SHA-256 fed in every split, HMAC()) for keys and messages of
// every length around the 64-byte block.
#include <catch2/catch.hpp>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <random>
#include <string>

#include "base/sha256.h"
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

namespace {

std::string sha256_hex(std::span<const std::byte> message) { return hex(chorus::Sha256::of(message)); }

}  // namespace

TEST_CASE("Sha256 gives FIPS 180-4's digests", "[job_secret]") {
  CHECK(sha256_hex(bytes_of("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex(bytes_of("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex(bytes_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(sha256_hex(bytes_of(million)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("Sha256 agrees with libcrypto whatever the lengths and however the input is split", "[job_secret]") {
  std::mt19937_64 random(180);
  for (size_t bytes : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096}) {
    std::vector<std::byte> message(bytes);
    for (auto& b : message) b = static_cast<std::byte>(random());
    chorus::Sha256::Digest expected{};
    REQUIRE(EVP_Digest(message.data(), message.size(), reinterpret_cast<unsigned char*>(expected.data()), nullptr,
                       EVP_sha256(), nullptr) == 1);
    INFO(bytes << " bytes");
    REQUIRE(chorus::Sha256::of(message) == expected);
    // Fed in random pieces, crossing block boundaries anywhere.
    chorus::Sha256 hash;
    size_t offset = 0;
    while (offset < bytes) {
      const size_t piece = std::min<size_t>(bytes - offset, random() % 150);
      hash.update(std::span(message).subspan(offset, piece));
      offset += piece;
    }
    REQUIRE(hash.finish() == expected);
  }
}
