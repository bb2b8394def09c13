// The TCP transport's public face: the options and the factory. Everything
// else in transport/tcp/ is private to it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/job_secret.h"
#include "base/tls.h"
#include "transport/positions.h"
#include "transport/transport.h"

namespace chorus::transport::tcp {

struct TcpDeviceOptions {
  int rank = 0;
  int size = 1;
  // Bind and publish the address of this network interface (e.g. "eth0")...
  std::string interface;
  // ...or this host name / IPv4 / IPv6 literal. With neither: the interface
  // of the default route, else loopback.
  std::string hostname;
  // Turns a tag signature into words for MismatchError text; may be empty.
  std::function<std::string(uint64_t)> describe_signature;
  // Alpha-beta numbers for algorithm selection. Unset: the built-in estimate
  // (same host or Ethernet, per peer).
  std::optional<LinkModel> link_model;
  // Connections per peer (Device::connect's `stream`). Published in the
  // address: a peer created with another count is refused at connect.
  int streams = 1;
  // What every connection proves it knows before it carries a frame
  // (handshake.h). Not configured: the proofs are made with an empty key.
  JobSecret secret;
  // TLS on every connection after the handshake (base/tls.h); null: none.
  std::shared_ptr<const TlsContext> tls;
  // Bytes of messages no receive was posted for that one connection buffers
  // at most; past it the device fails with an error naming the peer.
  size_t max_unexpected_bytes = size_t{1} << 30;
  // What this rank's probe answers report (transport/positions.h); may be null.
  std::shared_ptr<const PositionBoard> positions;
};

// Creates the listening socket and starts the progress thread. Throws
// InvalidArgument for bad options (unknown interface, unresolvable host) and
// IoError when the socket cannot be created or bound.
std::unique_ptr<Device> create_device(const TcpDeviceOptions& options);

}  // namespace chorus::transport::tcp
