// The shared-memory transport's public face: options, the factory and the
// probe. Everything else in transport/shm/ is private to it.
//
// Ranks on one host exchange messages through a pair of rings in memory
// both map (small messages: two copies, no system call) and, for large ones,
// copy straight out of each other's buffers with process_vm_readv (one
// copy) where the kernel allows it. See docs/shm.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/job_secret.h"
#include "transport/positions.h"
#include "transport/transport.h"

namespace chorus::transport::shm {

struct ShmDeviceOptions {
  int rank = 0;
  int size = 1;
  // Bytes of each ring (one per direction per peer), a power of two.
  size_t ring_bytes = size_t{1} << 20;
  // Messages of at least this many bytes are copied by the receiver out of
  // the sender's memory, where it may (CHORUS_SHM_SINGLE_COPY=0: never).
  size_t pull_threshold = size_t{64} << 10;
  bool single_copy = true;
  std::function<std::string(uint64_t)> describe_signature;
  // Unset: the built-in estimate for memory on one host.
  std::optional<LinkModel> link_model;
  // What every side-channel handshake proves (side_channel.h).
  JobSecret secret;
  // Bytes of eager messages no receive was posted for that one channel
  // buffers at most (offers to pull cost nothing and do not count).
  size_t max_unexpected_bytes = size_t{1} << 30;
  // What this rank's probe answers report (transport/positions.h); may be null.
  std::shared_ptr<const PositionBoard> positions;
};

// Creates the listener (an abstract unix socket) and starts the progress
// thread. Throws IoError when that fails.
std::unique_ptr<Device> create_device(const ShmDeviceOptions& options);

// Whether two ranks that published these shm addresses can share memory:
// the same kernel, the same user, the same network namespace.
bool can_connect(std::span<const std::byte> a, std::span<const std::byte> b);

}  // namespace chorus::transport::shm
