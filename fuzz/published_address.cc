// What every rank publishes through the store, which anyone who reaches the
// store can write: the published address (transport/published_address.cc)
// and the transports' address blobs inside it (transport/tcp/address.cc,
// transport/shm/address.cc).
//
// The first input byte picks the decoder, the rest is the blob:
//   0: the published address; each section named tcp or shm is decoded by
//      its transport too, as connect does.
//   1: a TCP listener address.   2: a shared-memory address.
// Checks: a blob is rejected only with InvalidArgument; a blob that decodes
// encodes back to the same bytes (published, shm) or to a blob that decodes
// to the same fields (tcp, whose padding and unused address bytes are free).
#include <netinet/in.h>

#include <cstring>

#include "fuzz/fuzz_common.h"
#include "transport/published_address.h"
#include "transport/shm/address.h"
#include "transport/tcp/address.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::transport;

namespace {

constexpr int kMyRank = 0;
constexpr int kPeerRank = 3;

void expect_invalid_argument(const std::string& kind, const char* what) {
  FUZZ_CHECK(kind.empty() || kind == "InvalidArgument", cat(what, " rejected a blob with ", kind));
}

bool same_socket(const tcp::SocketAddress& a, const tcp::SocketAddress& b) {
  if (a.family() != b.family() || a.port() != b.port()) return false;
  if (a.family() == AF_INET)
    return std::memcmp(&reinterpret_cast<const sockaddr_in*>(a.get())->sin_addr,
                       &reinterpret_cast<const sockaddr_in*>(b.get())->sin_addr, 4) == 0;
  const auto* x = reinterpret_cast<const sockaddr_in6*>(a.get());
  const auto* y = reinterpret_cast<const sockaddr_in6*>(b.get());
  return std::memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0 && x->sin6_scope_id == y->sin6_scope_id;
}

void tcp_address(std::span<const std::byte> blob) {
  tcp::ListenerAddress address;
  std::string kind = run_expecting_chorus_errors("tcp::decode_address", [&] {
    address = tcp::decode_address(blob, kMyRank, kPeerRank);
  });
  expect_invalid_argument(kind, "tcp::decode_address");
  if (!kind.empty()) return;
  FUZZ_CHECK(address.rank == kPeerRank, "a TCP address of another rank was accepted");
  FUZZ_CHECK(address.socket.port() != 0, "a TCP address with port 0 was accepted");
  FUZZ_CHECK(address.socket.family() == AF_INET || address.socket.family() == AF_INET6, "an unknown family");
  const std::vector<std::byte> again = tcp::encode_address(address);
  tcp::ListenerAddress decoded = tcp::decode_address(again, kMyRank, kPeerRank);
  FUZZ_CHECK(same_socket(decoded.socket, address.socket) && decoded.nonce == address.nonce &&
                 decoded.rank == address.rank && decoded.streams == address.streams,
             "a TCP address does not survive encode(decode(blob))");
}

void shm_address(std::span<const std::byte> blob) {
  shm::ShmAddress address;
  std::string kind = run_expecting_chorus_errors("shm::decode_address", [&] {
    address = shm::decode_address(blob, kMyRank, kPeerRank);
  });
  expect_invalid_argument(kind, "shm::decode_address");
  if (!kind.empty()) return;
  const std::vector<std::byte> again = shm::encode_address(address);
  FUZZ_CHECK(again.size() == blob.size() && std::memcmp(again.data(), blob.data(), blob.size()) == 0,
             "a shared-memory address does not encode back to its bytes");
  FUZZ_CHECK(address.socket_name().size() == 12 + 32 && address.socket_name()[0] == '\0',
             "the listener's socket name is not an abstract name of 32 hex digits");
}

void published(std::span<const std::byte> blob) {
  PublishedAddress address;
  std::string kind = run_expecting_chorus_errors("decode_published_address", [&] {
    address = decode_published_address(blob, kMyRank, kPeerRank);
  });
  expect_invalid_argument(kind, "decode_published_address");
  if (!kind.empty()) return;
  FUZZ_CHECK(address.host_name.size() <= 255 && address.sections.size() <= 16, "limits not enforced");
  for (const auto& section : address.sections) {
    FUZZ_CHECK(!section.transport.empty() && section.transport.size() <= 32 && section.address.size() <= 64 * 1024,
               "a section beyond the limits was accepted");
    FUZZ_CHECK(address.find(section.transport) == &section, "a transport named twice was accepted");
  }
  std::vector<std::byte> again;
  std::string encode_kind = run_expecting_chorus_errors("encode_published_address", [&] {
    again = encode_published_address(address);
  });
  FUZZ_CHECK(encode_kind.empty(), "a decoded published address cannot be encoded again");
  FUZZ_CHECK(again.size() == blob.size() && std::memcmp(again.data(), blob.data(), blob.size()) == 0,
             "a published address does not encode back to its bytes");
  // What connect does next with the sections it knows.
  if (const auto* section = address.find("tcp")) tcp_address(section->address);
  if (const auto* section = address.find("shm")) shm_address(section->address);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const uint8_t which = in.u8();
  const auto blob = in.rest();
  switch (which % 3) {
    case 0: published(blob); break;
    case 1: tcp_address(blob); break;
    case 2: shm_address(blob); break;
  }
  return 0;
}
