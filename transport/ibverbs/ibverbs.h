// The InfiniBand verbs transport's public face: options, the factory and the
// probe. Everything else in transport/ibverbs/ is private to it.
//
// Reliable-connected queue pairs set up with librdmacm: a rank resolves the
// peer's published IP address, so the kernel picks the device, port and GID
// (for RoCE v2 the IP-derived GID, never the link-local index 0). Small
// messages go as sends into pre-posted receive slots under credit flow
// control; large ones are written by the sender straight into the receiver's
// buffer, which the receiver advertises. See docs/ibverbs.md.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/job_secret.h"
#include "transport/positions.h"
#include "transport/transport.h"

namespace chorus::transport::ibverbs {

struct IbverbsDeviceOptions {
  int rank = 0;
  int size = 1;
  // Where to listen, as for tcp: an interface name, else a host name or
  // address. With neither: the interface of the default route.
  std::string interface;
  std::string hostname;
  // CHORUS_IB_DEVICE: "mlx5_0", "mlx5_0:1" or "mlx5_0:1:3" (device, port,
  // GID index). Overrides the address: the device listens on the IP address
  // that GID carries (so address resolution lands on that device and GID).
  std::string ib_device;
  int streams = 1;
  std::function<std::string(uint64_t)> describe_signature;
  // Unset: the built-in estimate (a 100 Gb/s fabric, or the device's rate).
  std::optional<LinkModel> link_model;
  // What every connection proves after the queue pair is up, before its
  // first message is accepted (docs/ibverbs.md).
  JobSecret secret;
  size_t max_unexpected_bytes = size_t{1} << 30;
  std::shared_ptr<const PositionBoard> positions;
};

// Never throws for a machine without RDMA: the device then publishes an
// empty address, can_connect() says no for every peer, and the mesh drops
// it. Throws InvalidArgument for bad options (an unknown CHORUS_IB_DEVICE).
std::unique_ptr<Device> create_device(const IbverbsDeviceOptions& options);

// Whether both ranks published a usable verbs address.
bool can_connect(std::span<const std::byte> a, std::span<const std::byte> b);

}  // namespace chorus::transport::ibverbs
