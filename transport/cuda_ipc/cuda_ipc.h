// The CUDA IPC transport's public face: options, the factory and the probe.
//
// Ranks on one host move device memory by CUDA IPC: the sender hands the
// receiver an IPC handle of the allocation holding the message (and the
// offset), the receiver maps it once (import_cache.h) and copies the bytes
// into its own buffer with the copy engine, then tells the sender it may
// reuse its buffer. Processes time-sliced on one GPU never wait on each
// other's kernels: a copy engine moves the bytes while either computes.
// Host memory, and the small control messages of that protocol, travel over
// an inner host transport (shared memory) that this one wraps, so a pair
// served by cuda_ipc moves both kinds.
//
// It offers itself only in a process that has already initialised CUDA
// when it connects (the driver library is loaded), or whose CHORUS_TRANSPORT
// names it, and that sees a device: a host-only job never loads CUDA for
// it. Ranks that are threads of one process never use it (a process cannot
// open its own IPC handles). Ranks on one host that did not
// both offer it talk over plain shm, and collectives on device memory then
// go through host memory (algorithms/execution/staging.h).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <span>

#include "memory/cuda/runtime.h"
#include "transport/transport.h"

namespace chorus::transport::cuda_ipc {

// What the protocol needs of device memory: the CUDA runtime (cuda_memory);
// in tests, host memory playing the device's part, so the protocol runs
// over a real shm pair on a machine without a GPU.
class IpcMemory {
 public:
  virtual ~IpcMemory() = default;
  virtual cuda::IpcExport export_region(const void* pointer, int device) = 0;
  virtual std::byte* open(const std::array<unsigned char, 64>& handle, int device) = 0;
  virtual void close(std::byte* mapped) = 0;
  // Returns once the bytes are there.
  virtual void copy(std::byte* to, const std::byte* from, size_t bytes, int device) = 0;
  // A device buffer of the transport's own (an eager send's copy).
  virtual std::shared_ptr<std::byte> allocate(size_t bytes, int device) = 0;
};

std::shared_ptr<IpcMemory> cuda_memory();

// Wraps a host transport's device (shm) into a cuda_ipc device.
// `move_messages`: device-memory messages go by the IPC protocol above;
// false: to the inner device (which must then move device memory itself,
// host staging), and the device only maps peer memory
// (Device::map_peer_memory) for collectives that read it in place.
std::unique_ptr<Device> wrap(int rank, std::unique_ptr<Device> inner, std::shared_ptr<IpcMemory> memory,
                             bool move_messages = true);

struct CudaIpcDeviceOptions {
  int rank = 0;
  // Makes the host transport the pairs wrap (shm), called only when CUDA
  // is usable here.
  std::function<std::unique_ptr<Device>()> create_host_device;
  // Whether two published inner addresses can share memory (shm's probe).
  bool (*host_can_connect)(std::span<const std::byte>, std::span<const std::byte>) = nullptr;
  // The job named cuda_ipc (CHORUS_TRANSPORT): load CUDA to offer it.
  bool asked = false;
  // Device-memory messages by the IPC protocol (CHORUS_CUDA_IPC_MESSAGES);
  // else create_host_device makes a device that moves them itself.
  bool move_messages = false;
};

std::unique_ptr<Device> create_device(const CudaIpcDeviceOptions& options);

// Both ranks offered CUDA IPC and their inner transport can connect them.
// The caller checks that they are on one host.
bool can_connect(std::span<const std::byte> a, std::span<const std::byte> b,
                 bool (*host_can_connect)(std::span<const std::byte>, std::span<const std::byte>));

}  // namespace chorus::transport::cuda_ipc
