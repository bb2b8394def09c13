// Device memory over a transport that moves host memory only (tcp, shm,
// ibverbs without GPUDirect): each message goes in chunks through pinned
// host buffers, pipelined. The sender copies chunk k+1 out of the device
// while chunk k is on the wire; the receiver copies chunk k into the device
// while chunk k+1 arrives. Chunks are ordinary messages of the inner pair
// with the message's own tag, so they keep its order (messages with equal
// tags arrive in order), its mismatch checks and its failure model. Both
// ends cut a message into the same chunks: the length decides them.
//
// wrap() decorates a Device: host memory goes straight through, memory of
// the staged kind takes the pipeline, run by one worker thread per wrapped device,
// started with its first device-memory message (a job that never moves
// device memory pays nothing: no thread, no pinned memory).
//
// This is how a collective's Plan moves device memory to peers on other
// hosts (the reductions stay on the device); small collectives go through
// host memory whole instead (algorithms/execution/staging.h), which costs fewer
// device round trips.
#pragma once

#include <cstddef>
#include <memory>

#include "transport/transport.h"

namespace chorus::transport::host_staging {

// How bytes get between device memory and pinned host memory: the memory
// kind's support (kind_copier); in tests, host memory playing the device's part.
class Copier {
 public:
  virtual ~Copier() = default;
  virtual std::byte* allocate_pinned(size_t bytes) = 0;
  virtual void free_pinned(std::byte* data) = 0;
  // Returns once the bytes are there; `device` is the device of the
  // device-side pointer.
  virtual void copy(std::byte* to, const std::byte* from, size_t bytes, int device) = 0;
};

struct StagingOptions {
  size_t chunk_bytes = size_t{1} << 20;
  // Chunks of one message in flight at once (its pipeline depth).
  size_t chunks_per_message = 4;
  // Pinned chunks of the wrapped device, shared by its messages.
  size_t pool_chunks = 16;
};

// `kind`: the memory kind staged (messages of other kinds go to `inner`).
std::unique_ptr<Device> wrap(std::unique_ptr<Device> inner, MemoryKind kind, std::shared_ptr<Copier> copier,
                             StagingOptions options = {});

// The copier of `kind` (memory/registry.h), its support loaded when first used.
std::shared_ptr<Copier> kind_copier(MemoryKind kind);

}  // namespace chorus::transport::host_staging
