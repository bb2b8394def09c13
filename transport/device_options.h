// What a Device of any transport is given, whatever the transport. Each
// transport's options (tcp::TcpDeviceOptions, shm::ShmDeviceOptions, ...)
// extend one of these with its own settings, so the registry fills the
// shared part once (transport/registry.cc) instead of field by field per
// transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/config.h"
#include "base/job_secret.h"
#include "transport/positions.h"

namespace chorus::transport {

struct CommonDeviceOptions {
  int rank = 0;
  int size = 1;
  // Turns a tag signature into words for MismatchError text; may be empty.
  std::function<std::string(uint64_t)> describe_signature;
  // What every connection proves it knows before it carries a frame (the
  // transport's handshake). Not configured: the proofs are made with an empty key.
  JobSecret secret;
  // Bytes of messages no receive was posted for that one connection buffers
  // at most; past it the device fails with an error naming the peer.
  size_t max_unexpected_bytes = size_t{1} << 30;
  // What this rank's probe answers report (transport/positions.h); may be null.
  std::shared_ptr<const PositionTable> positions;
};

// Transports that listen on a network address (tcp, ibverbs).
struct NetworkDeviceOptions : CommonDeviceOptions {
  // Bind and publish the address of this network interface (e.g. "eth0")...
  std::string interface;
  // ...or this host name / IPv4 / IPv6 literal.
  std::string hostname;
  // With neither: where the launch says the job lives (the store's host,
  // every rank on this host), which picks the address that reaches the peers.
  JobPlacement placement;
  // Connections per peer (Device::connect's `stream`). Published in the
  // address: a peer created with another count is refused at connect.
  int streams = 1;
};

}  // namespace chorus::transport
