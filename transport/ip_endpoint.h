// Where the network transports' published addresses (tcp/address.cc,
// ibverbs/address.cc) hold the endpoint a peer dials, laid out alike in
// both: the family u8 (4 or 6) at byte 6, the port u16 at 8, the IP
// address at 12 (16 bytes, in network order; IPv4 in the first 4) and the
// IPv6 scope id u32 at 28, numbers little-endian. What lies around it
// (magic, version, rank, ...) is each transport's own.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace chorus::transport {

struct IpEndpoint {
  sockaddr_storage storage{};  // a sockaddr_in or sockaddr_in6, with the port
  socklen_t length = 0;        // of that sockaddr
};

// Writes an AF_INET address as family 4, any other as IPv6.
void store_ip_endpoint(std::byte* blob, const sockaddr* address);
uint16_t load_ip_port(const std::byte* blob);
// Null when the family is neither 4 nor 6. The port may be 0.
std::optional<IpEndpoint> load_ip_endpoint(const std::byte* blob);

}  // namespace chorus::transport
