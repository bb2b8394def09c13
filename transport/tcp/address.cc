// Encoding of the published listener address (fixed 48-byte little-endian layout).
#include "transport/tcp/address.h"

#include <arpa/inet.h>

#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "transport/tcp/frame.h"

namespace chorus::transport::tcp {
namespace {

// Layout: magic u32 | version u16 | family u8 (4/6) | flags u8 (bit 0: TLS) | port u16 |
// pad u16 | ip 16 bytes | scope id u32 | rank u32 | streams u32 | nonce u64   (= 48 bytes)
constexpr uint32_t kAddressMagic = 0x41484354;  // "TCHA"
constexpr size_t kAddressBytes = 48;

}  // namespace

std::vector<std::byte> encode_address(const ListenerAddress& address) {
  std::vector<std::byte> blob(kAddressBytes);
  std::byte* out = blob.data();
  store_le(out + 0, kAddressMagic, 4);
  store_le(out + 4, kWireVersion, 2);
  store_le(out + 8, address.socket.port(), 2);
  if (address.socket.family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address.socket.get());
    out[6] = std::byte{4};
    std::memcpy(out + 12, &v4->sin_addr, 4);  // network order, as published
  } else {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address.socket.get());
    out[6] = std::byte{6};
    std::memcpy(out + 12, &v6->sin6_addr, 16);
    store_le(out + 28, v6->sin6_scope_id, 4);
  }
  store_le(out + 32, static_cast<uint32_t>(address.rank), 4);
  store_le(out + 36, static_cast<uint32_t>(address.streams), 4);
  store_le(out + 40, address.nonce, 8);
  out[7] = address.tls ? std::byte{1} : std::byte{0};
  return blob;
}

ListenerAddress decode_address(std::span<const std::byte> blob, int my_rank, int peer_rank) {
  auto invalid = [&](const char* why) {
    return InvalidArgument(cat("rank ", my_rank, ": the address published by peer rank ", peer_rank,
                               " is not a TCP transport address (", why, ", ", blob.size(),
                               " bytes)"));
  };
  if (blob.size() != kAddressBytes) throw invalid("wrong length");
  const std::byte* in = blob.data();
  if (load_le(in + 0, 4) != kAddressMagic) throw invalid("wrong magic");
  if (load_le(in + 4, 2) != kWireVersion) throw invalid("unsupported wire version");
  ListenerAddress address;
  uint16_t port = static_cast<uint16_t>(load_le(in + 8, 2));
  if (in[6] == std::byte{4}) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    std::memcpy(&v4.sin_addr, in + 12, 4);
    v4.sin_port = htons(port);
    address.socket = SocketAddress(reinterpret_cast<sockaddr*>(&v4), sizeof(v4));
  } else if (in[6] == std::byte{6}) {
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    std::memcpy(&v6.sin6_addr, in + 12, 16);
    v6.sin6_scope_id = static_cast<uint32_t>(load_le(in + 28, 4));
    v6.sin6_port = htons(port);
    address.socket = SocketAddress(reinterpret_cast<sockaddr*>(&v6), sizeof(v6));
  } else {
    throw invalid("unknown address family");
  }
  if (port == 0) throw invalid("port 0");
  address.rank = static_cast<int>(load_le(in + 32, 4));
  address.streams = static_cast<int>(load_le(in + 36, 4));
  address.nonce = load_le(in + 40, 8);
  if ((in[7] & ~std::byte{1}) != std::byte{0}) throw invalid("unknown flags");
  address.tls = in[7] == std::byte{1};
  if (address.rank != peer_rank)
    throw InvalidArgument(cat("rank ", my_rank, ": the address given for peer rank ", peer_rank,
                              " belongs to rank ", address.rank, " (",
                              address.socket.to_string(), ")"));
  return address;
}

}  // namespace chorus::transport::tcp
