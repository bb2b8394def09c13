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
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "transport/device_options.h"
#include "transport/transport.h"

namespace chorus::transport::ibverbs {

// Extends what every network transport is given (rank, secret, address, streams,
// ...); with neither interface nor hostname it listens on the interface of the
// default route.
struct IbverbsDeviceOptions : NetworkDeviceOptions {
  // CHORUS_IB_DEVICE: "mlx5_0", "mlx5_0:1" or "mlx5_0:1:3" (device, port,
  // GID index). Overrides the address: the device listens on the IP address
  // that GID carries (so address resolution lands on that device and GID).
  std::string ib_device;
  // Unset: the built-in estimate (a 100 Gb/s fabric, or the device's rate).
  std::optional<LinkModel> link_model;
};

// Never throws for a machine without RDMA: the device then publishes an
// empty address, can_connect() says no for every peer, and the mesh drops
// it. Throws InvalidArgument for bad options (an unknown CHORUS_IB_DEVICE).
std::unique_ptr<Device> create_device(const IbverbsDeviceOptions& options);

// Whether both ranks published a usable verbs address.
bool can_connect(std::span<const std::byte> a, std::span<const std::byte> b);

// How many memory regions this process's verbs devices have registered
// (ibv_reg_mr calls that succeeded): what tests and benchmarks read to see
// which buffers are pinned once and which once per message.
uint64_t memory_regions_registered();

}  // namespace chorus::transport::ibverbs
