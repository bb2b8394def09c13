// The handshakes that prove the job secret (base/job_secret.h): the TCP
// pair's challenge, hello and ack (transport/tcp/handshake.h), the shared-
// memory side channel's signed hello and ack (transport/shm/side_channel.h)
// and the TcpStore's greeting and proofs (rendezvous/tcp_store_protocol.h).
// The first byte picks the parser; then the secret the listener holds, its
// challenge, and the bytes a stranger sent.
//
// Checks: no parser throws or crashes on any bytes; whatever a check
// accepts is byte for byte what the holder of the secret would have sent
// for that challenge (so nothing but the secret admits, and no field can
// change under a valid proof); the honest message built from the same
// fields is accepted, and flipping any one of its bytes gets it refused.
#include <cstring>

#include "fuzz/fuzz_common.h"
#include "rendezvous/tcp_store_protocol.h"
#include "transport/shm/side_channel.h"
#include "transport/tcp/handshake.h"

using namespace chorus;
using namespace chorus::fuzz;

namespace {

template <size_t N>
std::array<std::byte, N> take(ByteReader& in) {
  std::array<std::byte, N> out{};
  auto part = in.bytes(N);
  if (!part.empty()) std::memcpy(out.data(), part.data(), part.size());
  return out;
}

bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

void tcp_hello(ByteReader& in, const JobSecret& secret, const Challenge& challenge) {
  transport::tcp::HelloExpectations expected;
  expected.nonce = in.u64();
  expected.rank = in.u8() % 8;
  expected.size = 1 + in.u8() % 16;
  expected.streams = 1 + in.u8() % 4;
  const size_t flip = in.u8();
  const auto bytes = take<transport::tcp::kHelloBytes>(in);
  transport::tcp::Hello hello;
  std::string why;
  FUZZ_CHECK(run_expecting_chorus_errors("check_hello",
                                         [&] { why = transport::tcp::check_hello(bytes, expected, challenge, secret, hello); })
                 .empty(),
             "check_hello threw");
  if (why.empty())
    FUZZ_CHECK(same(bytes, transport::tcp::encode_hello(hello, challenge, secret)), "an admitted hello is not the honest one");
  // The honest hello for these expectations passes; one flipped byte does not.
  hello = {expected.nonce, expected.rank + 1, expected.rank, 0, expected.streams, challenge};
  auto honest = transport::tcp::encode_hello(hello, challenge, secret);
  if (hello.dialer_rank >= expected.size) return;
  transport::tcp::Hello decoded;
  FUZZ_CHECK(transport::tcp::check_hello(honest, expected, challenge, secret, decoded).empty(),
             "the honest hello is refused");
  honest[flip % honest.size()] ^= std::byte{0x20};
  FUZZ_CHECK(!transport::tcp::check_hello(honest, expected, challenge, secret, decoded).empty(),
             "a changed hello is admitted");
}

void tcp_ack(ByteReader& in, const JobSecret& secret, const Challenge& challenge) {
  const auto hello = take<transport::tcp::kHelloBytes>(in);
  const int listener = in.u8(), dialer = in.u8(), stream = in.u8();
  const size_t flip = in.u8();
  const auto ack = take<transport::tcp::kAckBytes>(in);
  std::string why;
  FUZZ_CHECK(run_expecting_chorus_errors("check_ack", [&] {
               why = transport::tcp::check_ack(ack, hello, challenge, secret, listener, dialer, stream);
             }).empty(),
             "check_ack threw");
  const auto honest = transport::tcp::encode_ack(hello, challenge, secret, listener, dialer, stream);
  if (why.empty()) FUZZ_CHECK(same(ack, honest), "an accepted ack is not the honest one");
  FUZZ_CHECK(transport::tcp::check_ack(honest, hello, challenge, secret, listener, dialer, stream).empty(), "the honest ack is refused");
  auto changed = honest;
  changed[flip % changed.size()] ^= std::byte{0x01};
  FUZZ_CHECK(!transport::tcp::check_ack(changed, hello, challenge, secret, listener, dialer, stream).empty(),
             "a changed ack is accepted");
}

void tcp_challenge(ByteReader& in) {
  const auto bytes = take<transport::tcp::kChallengeMessageBytes>(in);
  Challenge decoded{};
  if (transport::tcp::decode_challenge(bytes, decoded).empty())
    FUZZ_CHECK(same(bytes, transport::tcp::encode_challenge(decoded)), "a challenge does not encode back");
}

void shm_signed(ByteReader& in, const JobSecret& secret, const Challenge& challenge) {
  const bool as_hello = in.flag();
  const auto message = in.rest();
  std::span<const std::byte> body;
  const std::string_view purpose = as_hello ? transport::shm::kShmHelloPurpose : transport::shm::kShmAckPurpose;
  std::string why;
  FUZZ_CHECK(run_expecting_chorus_errors("verify_side_message", [&] {
               why = transport::shm::verify_side_message(message, secret, purpose, {challenge}, body);
             }).empty(),
             "verify_side_message threw");
  if (!why.empty()) return;
  std::vector<std::byte> resigned(body.begin(), body.end());
  transport::shm::sign_side_message(resigned, secret, purpose, {challenge});
  FUZZ_CHECK(same(message, resigned), "a verified side message is not the honest one");
  transport::shm::SideKind kind{};
  if (!transport::shm::check_side_message(body, kind).empty()) return;
  transport::shm::Hello hello;
  transport::shm::Ack ack;
  if (kind == transport::shm::SideKind::hello && transport::shm::decode_hello(body, hello).empty())
    FUZZ_CHECK(same(body, transport::shm::encode_hello(hello)), "a hello does not encode back");
  if (kind == transport::shm::SideKind::ack && transport::shm::decode_ack(body, ack).empty())
    FUZZ_CHECK(same(body, transport::shm::encode_ack(ack)), "an ack does not encode back");
}

void store_exchange(ByteReader& in, const JobSecret& secret, const Challenge& challenge) {
  const uint8_t which = in.u8() % 3;
  const auto message = in.rest();
  std::string why;
  if (which == 0) {
    Challenge decoded{};
    bool tls = false;
    FUZZ_CHECK(run_expecting_chorus_errors("decode_server_challenge", [&] {
                 why = tcp_store::decode_server_challenge(message, decoded, &tls);
               }).empty(),
               "decode_server_challenge threw");
    if (why.empty())
      FUZZ_CHECK(same(message, tcp_store::encode_server_challenge(decoded, tls)), "a greeting does not encode back");
  } else if (which == 1) {
    FUZZ_CHECK(run_expecting_chorus_errors("check_client_proof", [&] {
                 why = tcp_store::check_client_proof(message, challenge, secret);
               }).empty(),
               "check_client_proof threw");
    if (why.empty()) {
      Challenge client{};
      std::memcpy(client.data(), message.data() + 4, client.size());
      FUZZ_CHECK(same(message, tcp_store::encode_client_proof(challenge, client, secret)),
                 "an admitted client proof is not the honest one");
    }
  } else {
    const auto client_proof = message.first(std::min(message.size(), tcp_store::kClientProofBytes));
    const auto answer = message.subspan(client_proof.size());
    FUZZ_CHECK(run_expecting_chorus_errors("check_server_proof", [&] {
                 why = tcp_store::check_server_proof(answer, challenge, client_proof, secret);
               }).empty(),
               "check_server_proof threw");
    if (why.empty())
      FUZZ_CHECK(same(answer, tcp_store::encode_server_proof(challenge, client_proof, secret)),
                 "an accepted server proof is not the honest one");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const uint8_t parser = in.u8() % 5;
  const std::string key = in.short_text();
  const JobSecret secret = key.empty() ? JobSecret() : JobSecret(key);
  const Challenge challenge = take<kChallengeBytes>(in);
  switch (parser) {
    case 0: tcp_challenge(in); break;
    case 1: tcp_hello(in, secret, challenge); break;
    case 2: tcp_ack(in, secret, challenge); break;
    case 3: shm_signed(in, secret, challenge); break;
    case 4: store_exchange(in, secret, challenge); break;
  }
  return 0;
}
