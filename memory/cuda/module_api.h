// The calls libchorus_cuda.so offers libchorus (memory/cuda/runtime.h): thin
// wrappers of the CUDA runtime and the reduction kernels, nothing else. All
// the logic (which stream, which scratch, when to wait) lives in libchorus,
// so it is the same code with or without a GPU and is tested on machines
// without one; the module only speaks to the driver.
//
// Plain function pointers and error strings, no C++ exceptions: an
// exception thrown in a dlopen'ed module (RTLD_LOCAL, its own copy of our
// error classes) is not one libchorus can reliably catch. Each call returns
// null on success, else a description of the failure ("cudaMalloc of 64 MiB
// on cuda:0: out of memory (cudaErrorMemoryAllocation)") that stays valid
// until the calling thread's next call. Streams and events are the
// runtime's handles (cudaStream_t, cudaEvent_t) as void*.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus::cuda {

using CudaStatus = const char*;

struct ModuleApi {
  // Bumped whenever the table changes; libchorus refuses another.
  uint32_t table_version;

  CudaStatus (*device_count)(int* count);
  // kind: 0 host (also unregistered), 1 device, 2 managed.
  CudaStatus (*describe_pointer)(const void* pointer, int* kind, int* device);
  // Makes `device` current on the calling thread.
  CudaStatus (*set_device)(int device);
  // The calling thread's current device.
  CudaStatus (*current_device)(int* device);
  // *enabled = 1 when contexts made on `device` are shared through MPS
  // (processes then run on it side by side), 0 when processes sharing it
  // take turns of it (time slices).
  CudaStatus (*mps_enabled)(int device, int* enabled);

  CudaStatus (*stream_create)(int device, void** stream);  // non-blocking stream
  CudaStatus (*stream_synchronize)(void* stream);
  CudaStatus (*event_create)(int device, void** event);  // timing disabled
  CudaStatus (*event_destroy)(void* event);
  CudaStatus (*event_record)(void* event, void* stream);
  // *done = 1 once the work recorded before the event has ended, else 0.
  CudaStatus (*event_query)(void* event, int* done);

  CudaStatus (*device_allocate)(int device, size_t bytes, void** pointer);
  CudaStatus (*device_free)(void* pointer);
  // Pinned and mapped into every device's address space.
  CudaStatus (*host_allocate)(size_t bytes, void** pointer);
  CudaStatus (*host_free)(void* pointer);
  // cudaMemcpyAsync with cudaMemcpyDefault (the pointers say which way).
  CudaStatus (*copy_async)(void* to, const void* from, size_t bytes, void* stream);

  // accumulator[i] = accumulator[i] op operand[i] (type and op as
  // chorus::DataType and chorus::ReduceOp), queued on `stream`.
  CudaStatus (*reduce_async)(int type, int op, void* accumulator, const void* operand, size_t count, void* stream);
  // data[i] /= contributors, as base/reduce.h's finish_average.
  CudaStatus (*average_async)(int type, void* data, size_t count, size_t contributors, void* stream);

  // Queues on `stream` a wait until *flag (pinned, mapped host memory from
  // host_allocate) is at least `value` (cuStreamWaitValue32).
  CudaStatus (*stream_wait_flag)(void* stream, const uint32_t* flag, uint32_t value);

  // CUDA IPC. export: the allocation holding `pointer`, memory of `device`
  // (its base, size, the driver's id of that allocation, unique for the
  // process's life, and the 64-byte IPC handle of its base); it makes
  // `device` current first, since the driver's queries need a context on
  // the calling thread (an async call's worker has none of its own). open:
  // maps another process's allocation into this one (on `device`); close:
  // unmaps it.
  CudaStatus (*ipc_export)(int device, const void* pointer, void** base, size_t* bytes, uint64_t* buffer_id,
                           unsigned char handle[64]);
  CudaStatus (*ipc_open)(const unsigned char handle[64], int device, void** pointer);
  CudaStatus (*ipc_close)(void* pointer);

  // The device's PCI bus id ("0000:3b:00.0"), which tells two ordinals of
  // two processes apart (or finds them to be one GPU).
  CudaStatus (*pci_bus_id)(int device, char id[32]);

  // NCCL, loaded from libnccl.so.2 on first use (a module built without
  // nccl.h, or a machine without the library, answers each with why not).
  // Types and ops are chorus's; the collectives are queued on `stream`.
  CudaStatus (*nccl_unique_id)(unsigned char id[128]);
  CudaStatus (*nccl_init)(int ranks, const unsigned char id[128], int rank, int device, void** communicator);
  CudaStatus (*nccl_destroy)(void* communicator);
  CudaStatus (*nccl_allreduce)(const void* input, void* output, size_t count, int type, int op, void* communicator,
                               void* stream);
  CudaStatus (*nccl_reduce)(const void* input, void* output, size_t count, int type, int op, int root,
                            void* communicator, void* stream);
  CudaStatus (*nccl_broadcast)(void* data, size_t count, int type, int root, void* communicator, void* stream);
};

inline constexpr uint32_t kModuleApiVersion = 6;
inline constexpr size_t kIpcHandleBytes = 64;

}  // namespace chorus::cuda
