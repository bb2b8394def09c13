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

#include "transport/device_options.h"
#include "transport/tag_matching.h"
#include "transport/transport.h"

namespace chorus::transport::shm {

// Extends what every transport is given (rank, secret, positions, ...).
struct ShmDeviceOptions : CommonDeviceOptions {
  // Bytes of each ring (one per direction per peer), a power of two.
  size_t ring_bytes = size_t{1} << 20;
  // Messages of at least this many bytes are copied by the receiver out of
  // the sender's memory, where it may (CHORUS_SHM_SINGLE_COPY=0: never).
  // The ring's size: a message that fits the ring goes through it. Measured
  // (benchmarks/README.md, "The shared-memory pull threshold"): below a MiB
  // the ring's two pipelined copies beat one process_vm_readv, which pins
  // the sender's pages and waits for a handshake; at 64 KiB a 4-rank ring
  // allreduce of 1-4 MiB took twice as long.
  size_t pull_threshold = size_t{1} << 20;
  // Eager bytes a sender lets wait unclaimed at a receiver (sent, but no
  // receive posted for them yet) before its further messages, of any size,
  // go as pulls, which wait for their receive. Without it a sender running
  // ahead of its receiver's posted receives fills the receiver's memory, up
  // to CHORUS_MAX_UNEXPECTED_BYTES and the error that limit raises (a 3 GiB
  // allreduce under ASan did). Only where pulls are possible; at most half
  // of max_unexpected_bytes. Measured (benchmarks/README.md, "The eager
  // window"): a 2-rank 64 MiB allreduce took 10-15% longer with 8-16 MiB,
  // no longer with 32 MiB than without any window.
  size_t eager_window_bytes = kDefaultEagerWindowBytes;
  bool single_copy = true;
  // Unset: the built-in estimate for memory on one host.
  std::optional<LinkModel> link_model;
};

// Creates the listener (an abstract unix socket) and starts the progress
// thread. Throws IoError when that fails.
std::unique_ptr<Device> create_device(const ShmDeviceOptions& options);

// Whether two ranks that published these shm addresses can share memory:
// the same kernel, the same user, the same network namespace.
bool can_connect(std::span<const std::byte> a, std::span<const std::byte> b);

}  // namespace chorus::transport::shm
