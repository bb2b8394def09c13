// Encoding of the published verbs address (fixed 120-byte little-endian layout).
#include "transport/ibverbs/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "base/little_endian.h"
#include "transport/ibverbs/wire.h"
#include "transport/ip_endpoint.h"

namespace chorus::transport::ibverbs {
namespace {

// magic u32 | version u16 | family u8 (4/6) | pad u8 | port u16 | pad u16 |
// ip 16 bytes | scope id u32 | rank u32 | streams u32 | pad u32 | nonce u64 |
// device name 64 bytes (NUL-padded)    (= 120 bytes)
constexpr uint32_t kAddressMagic = 0x41564243;  // "CBVA"
constexpr size_t kDeviceNameBytes = 64;
constexpr size_t kAddressBytes = 56 + kDeviceNameBytes;

}  // namespace

uint16_t VerbsAddress::port() const {
  if (ip.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ip)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&ip)->sin6_port);
}

std::string ip_text(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    return cat(text, ":", ntohs(v4->sin_port));
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return cat("[", text, "]:", ntohs(v6->sin6_port));
  }
  return "(no address)";
}

std::string VerbsAddress::to_string() const {
  return cat(ip_text(reinterpret_cast<const sockaddr*>(&ip)), " (", device.empty() ? "?" : device, ")");
}

std::vector<std::byte> encode_address(const VerbsAddress& address) {
  std::vector<std::byte> blob(kAddressBytes);
  std::byte* out = blob.data();
  store_le(out + 0, kAddressMagic, 4);
  store_le(out + 4, kWireVersion, 2);
  store_ip_endpoint(out, reinterpret_cast<const sockaddr*>(&address.ip));
  store_le(out + 32, static_cast<uint32_t>(address.rank), 4);
  store_le(out + 36, static_cast<uint32_t>(address.streams), 4);
  store_le(out + 48, address.nonce, 8);
  std::memcpy(out + 56, address.device.data(), std::min(address.device.size(), kDeviceNameBytes - 1));
  return blob;
}

VerbsAddress decode_address(std::span<const std::byte> blob, int my_rank, int peer_rank) {
  auto invalid = [&](const char* why) {
    return InvalidArgument(cat("rank ", my_rank, ": the address published by peer rank ", peer_rank,
                               " is not an ibverbs transport address (", why, ", ", blob.size(), " bytes)"));
  };
  if (blob.size() != kAddressBytes) throw invalid("wrong length");
  const std::byte* in = blob.data();
  if (load_le(in + 0, 4) != kAddressMagic) throw invalid("wrong magic");
  if (load_le(in + 4, 2) != kWireVersion) throw invalid("unsupported wire version");
  VerbsAddress address;
  if (load_ip_port(in) == 0) throw invalid("port 0");
  const std::optional<IpEndpoint> endpoint = load_ip_endpoint(in);
  if (!endpoint) throw invalid("unknown address family");
  address.ip = endpoint->storage;
  address.rank = static_cast<int>(load_le(in + 32, 4));
  address.streams = static_cast<int>(load_le(in + 36, 4));
  address.nonce = load_le(in + 48, 8);
  const char* name = reinterpret_cast<const char*>(in + 56);
  address.device.assign(name, strnlen(name, kDeviceNameBytes - 1));
  if (address.rank != peer_rank)
    throw InvalidArgument(cat("rank ", my_rank, ": the address given for peer rank ", peer_rank, " belongs to rank ",
                              address.rank, " (", address.to_string(), ")"));
  return address;
}

}  // namespace chorus::transport::ibverbs
