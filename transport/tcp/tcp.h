// The TCP transport's public face: the options and the factory. Everything
// else in transport/tcp/ is private to it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/tls.h"
#include "transport/device_options.h"
#include "transport/transport.h"

namespace chorus::transport::tcp {

// Extends what every network transport is given (rank, secret, address, streams, ...).
struct TcpDeviceOptions : NetworkDeviceOptions {
  // Alpha-beta numbers for algorithm selection. Unset: the built-in estimate
  // (same host or Ethernet, per peer).
  std::optional<LinkModel> link_model;
  // TLS on every connection after the handshake (base/tls.h); null: none.
  std::shared_ptr<const TlsContext> tls;
};

// Creates the listening socket and starts the progress thread. Throws
// InvalidArgument for bad options (unknown interface, unresolvable host) and
// IoError when the socket cannot be created or bound.
std::unique_ptr<Device> create_device(const TcpDeviceOptions& options);

}  // namespace chorus::transport::tcp
