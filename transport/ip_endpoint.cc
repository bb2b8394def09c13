// The endpoint inside a network transport's published address.
#include "transport/ip_endpoint.h"

#include <arpa/inet.h>

#include <cstring>

#include "base/little_endian.h"

namespace chorus::transport {

void store_ip_endpoint(std::byte* blob, const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    blob[6] = std::byte{4};
    store_le(blob + 8, ntohs(v4->sin_port), 2);
    std::memcpy(blob + 12, &v4->sin_addr, 4);
  } else {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    blob[6] = std::byte{6};
    store_le(blob + 8, ntohs(v6->sin6_port), 2);
    std::memcpy(blob + 12, &v6->sin6_addr, 16);
    store_le(blob + 28, v6->sin6_scope_id, 4);
  }
}

uint16_t load_ip_port(const std::byte* blob) { return static_cast<uint16_t>(load_le(blob + 8, 2)); }

std::optional<IpEndpoint> load_ip_endpoint(const std::byte* blob) {
  IpEndpoint endpoint;
  if (blob[6] == std::byte{4}) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&endpoint.storage);
    v4->sin_family = AF_INET;
    std::memcpy(&v4->sin_addr, blob + 12, 4);
    v4->sin_port = htons(load_ip_port(blob));
    endpoint.length = sizeof(sockaddr_in);
    return endpoint;
  }
  if (blob[6] == std::byte{6}) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&endpoint.storage);
    v6->sin6_family = AF_INET6;
    std::memcpy(&v6->sin6_addr, blob + 12, 16);
    v6->sin6_scope_id = static_cast<uint32_t>(load_le(blob + 28, 4));
    v6->sin6_port = htons(load_ip_port(blob));
    endpoint.length = sizeof(sockaddr_in6);
    return endpoint;
  }
  return std::nullopt;
}

}  // namespace chorus::transport
