// chorus's CUDA support, as the rest of the library sees it: what a pointer
// is, the memory backend of each device (scratch, copies and reduction
// kernels on a stream), pinned host memory for staging, and the ordering of
// a collective against the caller's stream. No CUDA header appears here.
//
// Why a module: libchorus does not link the CUDA runtime. The code that
// does, with the device kernels, is libchorus_cuda.so (memory/cuda/module.cc,
// built only when the CUDA toolkit is found), loaded the first time a
// process hands chorus CUDA memory, the way the TLS module is (base/tls.h).
// A host-only job never maps libcudart, and a framework that links its own
// CUDA runtime (PyTorch) keeps it: the module's runtime stays its own
// (RTLD_LOCAL) and both talk to the one driver. cuda_runtime() finds the
// module beside libchorus, else in the installed library directory;
// CHORUS_CUDA_MODULE names it instead.
//
// Streams. A collective on CUDA memory may name the caller's stream
// (CollectiveOptions::cuda_stream; null is the legacy default stream). Like
// NCCL: the collective reads its input only after the work the caller had
// queued on that stream when it issued the call, and work the caller queues
// on that stream after the call runs only after the collective's result is
// in place. An event recorded at issue, waited for by the thread that runs
// the collective before it touches a buffer, gives the first; the second is free
// for a blocking call (it returns with the result in place) and, for an
// async one, a wait the stream itself performs on a flag chorus sets when
// the collective ends (cuStreamWaitValue32), so the host never blocks on
// it. The flag is set when the collective fails too: the stream goes on
// and the error comes from Work::wait.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/memory.h"
#include "base/types.h"
#include "memory/kind_support.h"
#include "memory/memory_backend.h"

namespace chorus::cuda {

// A device allocation as another process opens it (CUDA IPC).
struct IpcExport {
  std::array<unsigned char, 64> handle{};  // of the allocation's base
  const std::byte* base = nullptr;         // in this process
  size_t allocation_bytes = 0;
  uint64_t buffer_id = 0;  // the driver's id of the allocation, unique for this process's life
};

// An NCCL communicator (the nccl allreduce backend, backends/nccl/); its collectives are
// queued on `stream` and return at once, as NCCL's do.
class NcclCommunicator {
 public:
  virtual ~NcclCommunicator() = default;
  virtual void allreduce(const void* input, void* output, size_t count, DataType type, ReduceOp op,
                         void* stream) = 0;
  virtual void reduce(const void* input, void* output, size_t count, DataType type, ReduceOp op, int root,
                      void* stream) = 0;
  virtual void broadcast(void* data, size_t count, DataType type, int root, void* stream) = 0;
};

using NcclUniqueId = std::array<unsigned char, 128>;

// The CUDA memory kind (memory/kind_support.h), with what CUDA alone
// offers: IPC between processes, NCCL, the bus id of a device.
class Runtime : public MemoryKindSupport {
 public:
  std::string_view display_name() const override { return "CUDA"; }
  // Devices this process can use; 0 when the driver has none (the reason
  // is then in no_device_reason()).
  virtual int device_count() = 0;
  virtual std::string no_device_reason() = 0;
  // The copies of MemoryKindSupport run on the calling thread's stream for
  // `device`; copy() also takes peer-mapped memory.
  // CUDA IPC: what another process needs to open the allocation holding
  // `pointer`, memory of `device`; opening maps it here (on `device`);
  // closing unmaps (errors are logged, not thrown: it runs in destructors).
  virtual IpcExport ipc_export(const void* pointer, int device) = 0;
  virtual std::byte* ipc_open(const std::array<unsigned char, 64>& handle, int device) = 0;
  virtual void ipc_close(std::byte* pointer) = 0;
  // "0000:3b:00.0": equal for two ordinals (of two processes) on one GPU.
  virtual std::string pci_bus_id(int device) = 0;
  // Returns once the work queued on `stream` (a cudaStream_t; null: the
  // legacy default stream) is done.
  virtual void synchronize(void* stream, int device) = 0;
  // NCCL, where the build and the machine have it (else IoError saying why).
  virtual NcclUniqueId nccl_unique_id() = 0;
  virtual std::unique_ptr<NcclCommunicator> nccl_communicator(int ranks, const NcclUniqueId& id, int rank,
                                                              int device) = 0;
};

// The process's runtime, loading the module on first use. Throws
// InvalidArgument when this build has no CUDA support or the module cannot
// be loaded (the message says which, and where it looked).
Runtime& cuda_runtime();

// The module's file name and entry points (module.cc defines them; the
// entry returns its memory/cuda/module_api.h table).
inline constexpr const char* kCudaModuleFile = "libchorus_cuda.so";
inline constexpr const char* kCudaModuleEntry = "chorus_cuda_module_api";
inline constexpr const char* kCudaModuleVersion = "chorus_cuda_module_version";

}  // namespace chorus::cuda
