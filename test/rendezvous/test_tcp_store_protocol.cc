// The TcpStore wire format: round trips, every truncation is "incomplete",
// broken limits are "invalid" before their bytes arrive, and no byte string
// crashes the parser.
#include <catch2/catch.hpp>

#include <random>

#include "base/error.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous_test_helpers.h"

using chorus::tcp_store::Op;
using chorus::tcp_store::ParseState;
using chorus::test::bytes;

TEST_CASE("TcpStore requests round-trip and every prefix is incomplete", "[tcp_store_protocol]") {
  std::vector<std::string> keys{"alpha", "", std::string("n\0l", 3)};
  auto frame = chorus::tcp_store::encode_request(Op::get, keys, {});
  chorus::tcp_store::Request request;
  auto outcome = chorus::tcp_store::parse_request(frame, request);
  REQUIRE(outcome.state == ParseState::complete);
  REQUIRE(outcome.consumed == frame.size());
  REQUIRE(request.op == Op::get);
  REQUIRE(request.keys == keys);
  for (size_t length = 0; length < frame.size(); ++length) {
    REQUIRE(chorus::tcp_store::parse_request(std::span(frame).first(length), request).state == ParseState::incomplete);
  }
  auto set = chorus::tcp_store::encode_request(Op::set, {"k"}, bytes(std::string("v\0v", 3)));
  auto both = set;
  both.insert(both.end(), frame.begin(), frame.end());
  outcome = chorus::tcp_store::parse_request(both, request);
  REQUIRE(outcome.state == ParseState::complete);
  REQUIRE(outcome.consumed == set.size());
  REQUIRE(request.value == bytes(std::string("v\0v", 3)));
}

TEST_CASE("TcpStore request limits are checked before the bytes arrive", "[tcp_store_protocol]") {
  using chorus::tcp_store::put_u32;
  using chorus::tcp_store::put_u64;
  chorus::tcp_store::Request request;
  auto header = [](uint8_t op, uint32_t keys) {
    std::vector<std::byte> frame;
    put_u32(frame, chorus::tcp_store::kMagic);
    frame.push_back(std::byte{op});
    put_u32(frame, keys);
    return frame;
  };
  auto state = [&](const std::vector<std::byte>& frame) { return chorus::tcp_store::parse_request(frame, request).state; };

  std::vector<std::byte> long_key = header(1, 1);
  put_u32(long_key, chorus::tcp_store::kMaxKeyBytes + 1);
  REQUIRE(state(long_key) == ParseState::invalid);

  std::vector<std::byte> huge_value = header(1, 1);
  put_u32(huge_value, 1);
  huge_value.push_back(std::byte{'k'});
  put_u64(huge_value, chorus::tcp_store::kMaxValueBytes + 1);
  REQUIRE(state(huge_value) == ParseState::invalid);

  REQUIRE(state(header(1, 2)) == ParseState::invalid);   // set of two keys
  REQUIRE(state(header(4, 0)) == ParseState::invalid);   // add of no key
  REQUIRE(state(header(6, 1)) == ParseState::invalid);   // cancel with a key
  REQUIRE(state(header(0, 1)) == ParseState::invalid);   // op 0
  REQUIRE(state(header(7, 1)) == ParseState::invalid);   // op past the last

  std::vector<std::byte> add_of_four = header(4, 1);
  put_u32(add_of_four, 1);
  add_of_four.push_back(std::byte{'k'});
  put_u64(add_of_four, 4);  // add carries exactly 8 bytes
  REQUIRE(state(add_of_four) == ParseState::invalid);

  REQUIRE_THROWS_AS(chorus::tcp_store::encode_request(Op::set, {std::string(5000, 'x')}, {}), chorus::InvalidArgument);
}

TEST_CASE("TcpStore parser survives random and mutated bytes", "[tcp_store_protocol]") {
  std::mt19937 random(12345);
  chorus::tcp_store::Request request;
  auto valid = chorus::tcp_store::encode_request(Op::get, {"a", "bb", "ccc"}, {});
  size_t complete = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> frame;
    if (i % 2 == 0) {
      frame = valid;
      int flips = 1 + static_cast<int>(random() % 4);
      for (int f = 0; f < flips; ++f) frame[random() % frame.size()] = static_cast<std::byte>(random());
    } else {
      frame.resize(random() % 64);
      for (auto& b : frame) b = static_cast<std::byte>(random());
      if (frame.size() >= 4 && random() % 2) {
        std::vector<std::byte> magic;
        chorus::tcp_store::put_u32(magic, chorus::tcp_store::kMagic);
        std::copy(magic.begin(), magic.end(), frame.begin());
      }
    }
    auto outcome = chorus::tcp_store::parse_request(frame, request);
    if (outcome.state == ParseState::complete) {
      ++complete;
      REQUIRE(outcome.consumed <= frame.size());
      REQUIRE(request.keys.size() <= chorus::tcp_store::kMaxKeysPerRequest);
    }
  }
  REQUIRE(complete > 0);  // some mutations only touch key bytes
}
