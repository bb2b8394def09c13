// The address blob a verbs device publishes through the bootstrap: the IP
// address and rdma_cm port it listens on, the random nonce a dialer must
// present, the owner's rank and connections per peer, and the RDMA device
// that address resolved to (for messages). An empty blob: no RDMA here.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace chorus::transport::ibverbs {

struct VerbsAddress {
  sockaddr_storage ip{};  // AF_INET or AF_INET6, with the port
  uint64_t nonce = 0;
  int rank = -1;
  int streams = 1;
  std::string device;  // "rxe0", at most 63 bytes

  uint16_t port() const;
  // "10.77.0.2:41234 (rxe1)"
  std::string to_string() const;
};

std::vector<std::byte> encode_address(const VerbsAddress& address);
// Throws InvalidArgument (naming `my_rank` and `peer_rank`) for a blob that
// is not a verbs address of this wire version.
VerbsAddress decode_address(std::span<const std::byte> blob, int my_rank, int peer_rank);

// "10.77.0.2:41234" for any sockaddr of family AF_INET/AF_INET6.
std::string ip_text(const sockaddr* address);

}  // namespace chorus::transport::ibverbs
