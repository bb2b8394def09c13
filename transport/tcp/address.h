// The address blob a TCP device publishes through the bootstrap: where it
// listens, the random nonce a dialer must present, the owner's rank and its
// number of connections per peer, and whether it uses TLS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/tcp/socket.h"

namespace chorus::transport::tcp {

struct ListenerAddress {
  SocketAddress socket;
  // Proves a dialer read this job's bootstrap: a stale or foreign process
  // that finds the port cannot guess it.
  uint64_t nonce = 0;
  int rank = -1;
  // Connections the owner keeps per peer (TcpDeviceOptions::streams).
  int streams = 1;
  // Whether the owner speaks TLS after the handshake (base/tls.h): every
  // rank must agree, which connect checks before dialing.
  bool tls = false;
};

std::vector<std::byte> encode_address(const ListenerAddress& address);
// Throws InvalidArgument (naming `my_rank` and `peer_rank`) for a blob that is
// not a TCP address of this wire version.
ListenerAddress decode_address(std::span<const std::byte> blob, int my_rank, int peer_rank);

}  // namespace chorus::transport::tcp
