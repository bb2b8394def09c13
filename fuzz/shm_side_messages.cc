// The shared-memory side channel's messages (transport/shm/side_channel.cc):
// the header check every message goes through, and the decoder of each kind
// (hello, ack, confirm: the handshake's; abort: an aborting peer's reason).
// The input is one message, as one SOCK_SEQPACKET read would return it.
//
// Checks: the header check agrees with the layout (magic "CSID", version 2,
// kinds 1 to 8); a message a decoder accepts encodes back to exactly its
// bytes, so no byte of it went unread or was read twice.
#include <cstring>

#include "fuzz/fuzz_common.h"
#include "transport/shm/side_channel.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::transport::shm;

namespace {

uint64_t field(std::span<const std::byte> bytes, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= std::to_integer<uint64_t>(bytes[offset + i]) << (8 * i);
  return value;
}

void expect_same(std::span<const std::byte> message, const std::vector<std::byte>& again, const char* what) {
  FUZZ_CHECK(again.size() == message.size() && std::memcmp(again.data(), message.data(), message.size()) == 0,
             cat("a decoded ", what, " does not encode back to its bytes"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> message(reinterpret_cast<const std::byte*>(data), size);
  SideKind kind{};
  std::string why;
  std::string thrown = run_expecting_chorus_errors("check_side_message", [&] { why = check_side_message(message, kind); });
  FUZZ_CHECK(thrown.empty(), "check_side_message threw instead of saying why");
  const bool sound_header = size >= 8 && field(message, 0, 4) == 0x44495343 && field(message, 4, 2) == 3 &&
                            field(message, 6, 2) >= 1 && field(message, 6, 2) <= 8;
  FUZZ_CHECK(why.empty() == sound_header, cat("check_side_message says '", why, "' of a header that is ",
                                              sound_header ? "sound" : "not sound"));
  if (!why.empty()) return 0;
  FUZZ_CHECK(static_cast<uint64_t>(kind) == field(message, 6, 2), "check_side_message reports another kind");

  switch (kind) {
    case SideKind::hello: {
      Hello hello;
      if (decode_hello(message, hello).empty()) expect_same(message, encode_hello(hello), "hello");
      break;
    }
    case SideKind::ack: {
      Ack ack;
      if (decode_ack(message, ack).empty()) {
        FUZZ_CHECK(ack.listener_pulls <= 1, "an ack's pull flag beyond 1");
        expect_same(message, encode_ack(ack), "ack");
      }
      break;
    }
    case SideKind::confirm: {
      Confirm confirm;
      if (decode_confirm(message, confirm).empty()) expect_same(message, encode_confirm(confirm), "confirm");
      break;
    }
    case SideKind::abort: {
      AbortNote note;
      if (decode_abort(message, note).empty()) expect_same(message, encode_abort(note), "abort");
      break;
    }
    case SideKind::goodbye:
      // Carries nothing; the channel never reads past its header.
      break;
    case SideKind::challenge: {
      Challenge challenge{};
      if (decode_challenge(message, challenge).empty()) expect_same(message, encode_challenge(challenge), "challenge");
      break;
    }
    case SideKind::probe:
    case SideKind::probe_answer: {
      ProbeNote note;
      if (decode_probe(message, note).empty()) expect_same(message, encode_probe(kind, note), "probe");
      break;
    }
  }
  return 0;
}
