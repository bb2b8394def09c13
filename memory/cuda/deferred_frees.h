// Frees of CUDA memory held back while a caller's stream waits on a stream
// flag (stream_flags.h).
//
// cudaFree and cudaFreeHost return only once the work queued on the device
// has ended, and a stream waiting on a flag is such work. Measured on the
// H200 (2026-11-30, benchmarks/cuda/stream_wait_probe.cu): while a stream
// waited on an unset flag, cudaMalloc, cudaHostAlloc, cudaHostRegister,
// stream and event creation and destruction, cudaIpcGetMemHandle and copies
// on other streams returned in 1-11 ms, but cudaFree, cudaFreeHost and
// cudaHostUnregister did not return until the flag was set. The flag of an async
// collective is set by the worker that runs it, so a worker freeing memory
// (a staging buffer grown, a temporary dropped) during it waited for itself:
// chorus.torch's second all_reduce of CUDA tensors hung there.
//
// So while any flag is waited on, frees are kept; the first free asked for
// once none is makes them all. Queuing a wait and freeing exclude each
// other, so no wait can be queued while a free runs. A free kept this way
// costs memory for as long as async calls overlap, never correctness.
//
// Host logic only (the frees are a function the runtime gives), tested in
// test/cuda/test_cuda_host.cc.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace chorus::cuda {

class DeferredFrees {
 public:
  enum class Kind { device, pinned };
  using Free = std::function<void(void* pointer, Kind kind)>;

  explicit DeferredFrees(Free free) : free_(std::move(free)) {}
  ~DeferredFrees();
  DeferredFrees(const DeferredFrees&) = delete;
  DeferredFrees& operator=(const DeferredFrees&) = delete;

  // A stream is to wait on a flag: `queue` queues the wait (and may throw:
  // then no wait is counted). No free runs meanwhile.
  void begin_wait(const std::function<void()>& queue);
  // A flag counted by begin_wait was set: its stream goes on.
  void end_wait();
  // Frees `pointer` now, or keeps it while any wait is queued.
  void free(void* pointer, Kind kind);

  size_t waits() const;
  size_t kept() const;

 private:
  void free_kept();  // under mutex_

  Free free_;
  mutable std::mutex mutex_;
  size_t waits_ = 0;
  std::vector<std::pair<void*, Kind>> kept_;
};

}  // namespace chorus::cuda
