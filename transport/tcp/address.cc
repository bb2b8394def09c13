// Encoding of the published listener address (fixed 48-byte little-endian layout).
#include "transport/tcp/address.h"

#include "base/error.h"
#include "base/log.h"
#include "transport/ip_endpoint.h"
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
  store_ip_endpoint(out, address.socket.get());
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
  const std::optional<IpEndpoint> endpoint = load_ip_endpoint(in);
  if (!endpoint) throw invalid("unknown address family");
  address.socket = SocketAddress(reinterpret_cast<const sockaddr*>(&endpoint->storage), endpoint->length);
  if (load_ip_port(in) == 0) throw invalid("port 0");
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
