// chorus-cuda-stream-wait-probe: what an async collective on CUDA memory
// relies on, asked of the machine directly.
//
// An async call makes the caller's stream wait (cuStreamWaitValue32) on a
// flag in pinned host memory that chorus's worker sets when the call ends
// (memory/cuda/stream_flags.h). On the H200 (2026-11-30) chorus.torch's
// second all_reduce of CUDA tensors never started, with no thread in a
// transport. Two explanations fit, and this program tells them apart:
//
//   1. the flag set by the host is not seen by the waiting stream
//      (checked on a stream of our own and on the legacy default stream,
//      which is torch's);
//   2. a CUDA call the worker makes while a stream waits on a flag (pinned
//      or device allocation, freeing, IPC export) does not return until
//      every stream's queued work is done, which includes the wait: a
//      deadlock. Each call is made on a second thread with the flag unset;
//      one still blocked after 3 s is reported, and the flag is then set to
//      let it go.
//
// Exits 0 and prints one line per check; any "BLOCKED" or "NOT SEEN" line
// is a finding, not a crash. On the H200 (2026-11-30) the flag was seen in
// 9-16 us on both streams, and the frees (cudaFree, cudaFreeHost,
// cudaHostUnregister) were the calls that blocked: memory/cuda/deferred_frees.h.
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

namespace {

using StreamWaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

void check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "stream-wait-probe: %s: %s\n", what, cudaGetErrorString(error));
  std::exit(1);
}

StreamWaitValue32 wait_value_function() {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  check(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &function, 12000, cudaEnableDefault, &found),
        "cudaGetDriverEntryPointByVersion");
  if (found != cudaDriverEntryPointSuccess) {
    std::printf("cuStreamWaitValue32: NOT FOUND in the driver\n");
    std::exit(0);
  }
  return reinterpret_cast<StreamWaitValue32>(function);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Flag {
  volatile uint32_t* host = nullptr;
  CUdeviceptr device = 0;
};

Flag make_flag() {
  Flag flag;
  void* memory = nullptr;
  check(cudaHostAlloc(&memory, 64, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc (flag)");
  flag.host = static_cast<volatile uint32_t*>(memory);
  *flag.host = 0;
  void* device_view = nullptr;
  check(cudaHostGetDevicePointer(&device_view, memory, 0), "cudaHostGetDevicePointer");
  flag.device = reinterpret_cast<CUdeviceptr>(device_view);
  return flag;
}

// Queues a wait for the flag and an event after it; the host sets the flag
// after 50 ms; reports whether the event completes within 5 s.
void check_flag_seen(StreamWaitValue32 wait_value, cudaStream_t stream, const char* stream_name) {
  Flag flag = make_flag();
  cudaEvent_t after;
  check(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), "cudaEventCreate");
  const CUresult queued = wait_value(reinterpret_cast<CUstream>(stream), flag.device, 1, CU_STREAM_WAIT_VALUE_GEQ);
  if (queued != CUDA_SUCCESS) {
    std::printf("flag on %s: cuStreamWaitValue32 FAILED with CUresult %d\n", stream_name, static_cast<int>(queued));
    return;
  }
  check(cudaEventRecord(after, stream), "cudaEventRecord");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const bool early = cudaEventQuery(after) == cudaSuccess;
  const auto set_at = std::chrono::steady_clock::now();
  *flag.host = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  cudaError_t state;
  while ((state = cudaEventQuery(after)) == cudaErrorNotReady && seconds_since(set_at) < 5) {
  }
  if (state == cudaSuccess)
    std::printf("flag on %s: seen %.1f us after the host set it%s\n", stream_name, seconds_since(set_at) * 1e6,
                early ? " (BUT the stream had passed before it was set)" : "");
  else
    std::printf("flag on %s: NOT SEEN 5 s after the host set it (%s)\n", stream_name, cudaGetErrorString(state));
}

// Runs `call` on a second thread while `stream` waits on an unset flag.
void check_call_while_waiting(StreamWaitValue32 wait_value, cudaStream_t stream, const char* stream_name,
                              const char* call_name, const std::function<void()>& call) {
  Flag flag = make_flag();
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize before");
  const CUresult queued = wait_value(reinterpret_cast<CUstream>(stream), flag.device, 1, CU_STREAM_WAIT_VALUE_GEQ);
  if (queued != CUDA_SUCCESS) {
    std::printf("%s while %s waits: cuStreamWaitValue32 FAILED (%d)\n", call_name, stream_name, static_cast<int>(queued));
    return;
  }
  std::atomic<bool> returned{false};
  const auto started = std::chrono::steady_clock::now();
  std::thread caller([&] {
    check(cudaSetDevice(0), "cudaSetDevice (caller)");
    call();
    returned.store(true);
  });
  while (!returned.load() && seconds_since(started) < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool blocked = !returned.load();
  *flag.host = 1;
  caller.join();
  if (blocked)
    std::printf("%s while %s waits on a flag: BLOCKED until the flag was set (%.1f s)\n", call_name, stream_name,
                seconds_since(started));
  else
    std::printf("%s while %s waits on a flag: returned in %.1f us\n", call_name, stream_name,
                seconds_since(started) * 1e6);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize after");
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run killed while blocked keeps what it found
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "context");
  const StreamWaitValue32 wait_value = wait_value_function();
  cudaStream_t own;
  check(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), "cudaStreamCreate");
  check_flag_seen(wait_value, own, "a non-blocking stream");
  check_flag_seen(wait_value, nullptr, "the legacy default stream");

  void* device_buffer = nullptr;
  check(cudaMalloc(&device_buffer, 1 << 20), "cudaMalloc");
  cudaStream_t other;
  check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "cudaStreamCreate");
  void* small_pinned = nullptr;
  check(cudaHostAlloc(&small_pinned, 64, cudaHostAllocDefault), "cudaHostAlloc");
  // Each call alone; what it needs made beforehand, and what it made freed
  // after the flag is set.
  void* pinned = nullptr;
  void* device = nullptr;
  void* host = std::malloc(1 << 20);
  cudaEvent_t event;
  cudaStream_t doomed;
  for (cudaStream_t stream : {own, static_cast<cudaStream_t>(nullptr)}) {
    const char* name = stream ? "a non-blocking stream" : "the legacy default stream";
    check_call_while_waiting(wait_value, stream, name, "cudaHostAlloc 1 MiB", [&] {
      check(cudaHostAlloc(&pinned, 1 << 20, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc");
    });
    check_call_while_waiting(wait_value, stream, name, "cudaFreeHost 1 MiB",
                             [&] { check(cudaFreeHost(pinned), "cudaFreeHost"); });
    if (!stream) break;  // the rest on our own stream only
    check_call_while_waiting(wait_value, stream, name, "cudaMalloc 1 MiB",
                             [&] { check(cudaMalloc(&device, 1 << 20), "cudaMalloc"); });
    check_call_while_waiting(wait_value, stream, name, "cudaFree 1 MiB", [&] { check(cudaFree(device), "cudaFree"); });
    check_call_while_waiting(wait_value, stream, name, "cudaMallocAsync+cudaFreeAsync 1 MiB", [&] {
      check(cudaMallocAsync(&device, 1 << 20, other), "cudaMallocAsync");
      check(cudaFreeAsync(device, other), "cudaFreeAsync");
      check(cudaStreamSynchronize(other), "cudaStreamSynchronize");
    });
    check_call_while_waiting(wait_value, stream, name, "cudaHostRegister 1 MiB",
                             [&] { check(cudaHostRegister(host, 1 << 20, cudaHostRegisterPortable), "cudaHostRegister"); });
    check_call_while_waiting(wait_value, stream, name, "cudaHostUnregister 1 MiB",
                             [&] { check(cudaHostUnregister(host), "cudaHostUnregister"); });
    check_call_while_waiting(wait_value, stream, name, "cudaStreamCreate",
                             [&] { check(cudaStreamCreateWithFlags(&doomed, cudaStreamNonBlocking), "cudaStreamCreate"); });
    check_call_while_waiting(wait_value, stream, name, "cudaStreamDestroy",
                             [&] { check(cudaStreamDestroy(doomed), "cudaStreamDestroy"); });
    check_call_while_waiting(wait_value, stream, name, "cudaEventCreate+cudaEventDestroy", [&] {
      check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
      check(cudaEventDestroy(event), "cudaEventDestroy");
    });
    check_call_while_waiting(wait_value, stream, name, "cudaIpcGetMemHandle", [&] {
      cudaIpcMemHandle_t handle;
      check(cudaIpcGetMemHandle(&handle, device_buffer), "cudaIpcGetMemHandle");
    });
    check_call_while_waiting(wait_value, stream, name, "cudaMemcpyAsync 8 B on another stream", [&] {
      check(cudaMemcpyAsync(small_pinned, device_buffer, 8, cudaMemcpyDeviceToHost, other), "cudaMemcpyAsync");
      check(cudaStreamSynchronize(other), "cudaStreamSynchronize");
    });
  }
  std::free(host);
  std::printf("stream-wait-probe: done\n");
  return 0;
}
