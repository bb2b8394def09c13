// chorus-cuda-copy-latency: how long one small round trip between device
// memory and pinned host memory takes when N processes share one GPU, by
// the ways a staged collective could make it.
//
// Why: on the H100, time-sliced (no MPS), 4 processes, the staged allreduce
// took about 600 us from 8 B to 16 KiB and 67 us at 32 KiB (docs/cuda.md,
// "MPS"): the size of the two copies decided it, not the host collective.
// This program separates the copy from everything else. Each process forks
// before touching CUDA (one context per process, as ranks have), all start
// each measurement together, and each copies and waits as run_staged does.
//
// What it found on the H200 (2026-11-30, benchmarks/README.md): a copy to
// the device under 32 KiB waits for the process's turn of the GPU (274 us
// at 2 processes, 548 at 4; 6-10 us alone), a copy from the device does not
// at any size (8 us), and neither does one to the device from 32 KiB on
// (9-15 us). The batch API's copy-engine hint changes nothing.
//
// The ways, as a round trip (device to host, then back) and each direction
// alone:
//
//   memcpy_sync    cudaMemcpyAsync on the process's stream, cudaStreamSynchronize
//   memcpy_spin    the same, waiting by polling cudaEventQuery (no yield)
//   kernel_mapped  one thread block copies through host memory mapped into
//                  the device (cudaHostAllocMapped), then cudaStreamSynchronize
// and each direction alone (d2h_sync, h2d_sync), to tell which direction
// pays where the round trip is slow, then two ways around a small copy to
// the device: d2d_sync (a device-to-device copy of the size alone) and
// h2d_padded (32 KiB to device scratch, then the size from there to the
// buffer, one wait), which memory/cuda's CHORUS_CUDA_PADDED_UPLOAD does.
// (A cudaMemcpyBatchAsync variant with the copy-engine hint measured the
// same as plain copies on the H200 and was dropped.)
//
// Prints, per process count, method and size, the median and 10th
// percentile of a round trip in microseconds over all processes' samples.
//
//   chorus-cuda-copy-latency [--processes 1,2,4] [--ms-per-cell 100]
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kSizes[] = {8, 1024, 4096, 16384, 32768, 65536, 262144};
enum Method { memcpy_sync, memcpy_spin, kernel_mapped, d2h_sync, h2d_sync, d2d_sync, h2d_padded };
constexpr const char* kMethods[] = {"memcpy_sync", "memcpy_spin", "kernel_mapped", "d2h_sync",
                                    "h2d_sync",    "d2d_sync",    "h2d_padded"};
constexpr int kMethodCount = 7;
constexpr size_t kPaddedBytes = 32768;
constexpr int kSizeCount = sizeof(kSizes) / sizeof(kSizes[0]);
constexpr int kMaxSamples = 20000;

__global__ void copy_bytes(unsigned char* to, const unsigned char* from, size_t bytes) {
  for (size_t index = threadIdx.x + static_cast<size_t>(blockIdx.x) * blockDim.x; index < bytes;
       index += static_cast<size_t>(blockDim.x) * gridDim.x)
    to[index] = from[index];
}

// Shared between the forked processes: a start line per cell and the samples.
struct Shared {
  std::atomic<int> arrived[kMethodCount * kSizeCount];
  std::atomic<int> failed;
  int counts[8][kMethodCount * kSizeCount];
  float samples[8][kMethodCount * kSizeCount][kMaxSamples];
};

void check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "copy-latency: %s: %s\n", what, cudaGetErrorString(error));
  std::exit(1);
}

void spin_wait(cudaEvent_t event, cudaStream_t stream) {
  check(cudaEventRecord(event, stream), "cudaEventRecord");
  cudaError_t state;
  while ((state = cudaEventQuery(event)) == cudaErrorNotReady) {
  }
  check(state, "cudaEventQuery");
}

void measure(Shared& shared, int process, int processes, double ms_per_cell) {
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t event;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  const size_t largest = kSizes[kSizeCount - 1];
  unsigned char *device = nullptr, *pinned = nullptr, *mapped_host = nullptr, *mapped_device = nullptr;
  check(cudaMalloc(&device, largest), "cudaMalloc");
  unsigned char *other_device = nullptr, *scratch = nullptr;
  check(cudaMalloc(&other_device, largest), "cudaMalloc");
  check(cudaMalloc(&scratch, largest), "cudaMalloc");
  check(cudaHostAlloc(reinterpret_cast<void**>(&pinned), largest, cudaHostAllocDefault), "cudaHostAlloc");
  check(cudaHostAlloc(reinterpret_cast<void**>(&mapped_host), largest, cudaHostAllocMapped), "cudaHostAlloc mapped");
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&mapped_device), mapped_host, 0), "device pointer");
  check(cudaMemset(device, 1, largest), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (int method = 0; method < kMethodCount; ++method) {
    for (int size = 0; size < kSizeCount; ++size) {
      const int cell = method * kSizeCount + size;
      const size_t bytes = kSizes[size];
      // Everyone starts the cell together, so the processes contend.
      shared.arrived[cell].fetch_add(1);
      while (shared.arrived[cell].load() < processes && shared.failed.load() == 0) {
      }
      const auto started = std::chrono::steady_clock::now();
      int count = 0;
      while (count < kMaxSamples) {
        const auto begin = std::chrono::steady_clock::now();
        switch (method) {
          case kernel_mapped:
            copy_bytes<<<1, 256, 0, stream>>>(mapped_device, device, bytes);
            check(cudaStreamSynchronize(stream), "sync after kernel");
            copy_bytes<<<1, 256, 0, stream>>>(device, mapped_device, bytes);
            check(cudaStreamSynchronize(stream), "sync after kernel");
            break;
          case memcpy_sync:
          case memcpy_spin:
            check(cudaMemcpyAsync(pinned, device, bytes, cudaMemcpyDeviceToHost, stream), "to host");
            if (method == memcpy_sync) check(cudaStreamSynchronize(stream), "sync");
            else spin_wait(event, stream);
            check(cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, stream), "to device");
            if (method == memcpy_sync) check(cudaStreamSynchronize(stream), "sync");
            else spin_wait(event, stream);
            break;
          case d2h_sync:
          case h2d_sync:
            if (method == d2h_sync) check(cudaMemcpyAsync(pinned, device, bytes, cudaMemcpyDeviceToHost, stream), "to host");
            else check(cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, stream), "to device");
            check(cudaStreamSynchronize(stream), "sync");
            break;
          case d2d_sync:
            check(cudaMemcpyAsync(other_device, device, bytes, cudaMemcpyDeviceToDevice, stream), "device to device");
            check(cudaStreamSynchronize(stream), "sync");
            break;
          case h2d_padded:
            check(cudaMemcpyAsync(scratch, pinned, std::max(bytes, kPaddedBytes), cudaMemcpyHostToDevice, stream),
                  "to scratch");
            check(cudaMemcpyAsync(device, scratch, bytes, cudaMemcpyDeviceToDevice, stream), "scratch to buffer");
            check(cudaStreamSynchronize(stream), "sync");
            break;
        }
        const auto end = std::chrono::steady_clock::now();
        shared.samples[process][cell][count++] = std::chrono::duration<float, std::micro>(end - begin).count();
        if (std::chrono::duration<double, std::milli>(end - started).count() > ms_per_cell) break;
      }
      shared.counts[process][cell] = count;
    }
  }
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> values;
  for (const char* at = text; *at;) {
    values.push_back(std::atoi(at));
    const char* comma = std::strchr(at, ',');
    if (!comma) break;
    at = comma + 1;
  }
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> process_counts = {1, 2, 4};
  double ms_per_cell = 100;
  for (int index = 1; index + 1 < argc; index += 2) {
    if (std::strcmp(argv[index], "--processes") == 0) process_counts = parse_list(argv[index + 1]);
    else if (std::strcmp(argv[index], "--ms-per-cell") == 0) ms_per_cell = std::atof(argv[index + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--processes 1,2,4] [--ms-per-cell 100]\n", argv[0]);
      return 2;
    }
  }
  std::printf("%-10s %-14s %8s %10s %10s %8s\n", "processes", "method", "bytes", "median_us", "p10_us", "samples");
  std::fflush(stdout);  // before fork, or every child prints it again
  for (int processes : process_counts) {
    if (processes < 1 || processes > 8) {
      std::fprintf(stderr, "copy-latency: 1 to 8 processes, not %d\n", processes);
      return 2;
    }
    void* memory = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return 1;
    auto* shared = new (memory) Shared();
    std::vector<pid_t> children;
    for (int process = 0; process < processes; ++process) {
      const pid_t child = fork();
      if (child == 0) {
        measure(*shared, process, processes, ms_per_cell);
        _exit(0);
      }
      children.push_back(child);
    }
    // In the order they end: one that fails releases the others' start lines.
    bool ok = true;
    for (size_t ended = 0; ended < children.size(); ++ended) {
      int status = 0;
      if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ok = false;
        shared->failed.store(1);
      }
    }
    if (!ok) {
      std::fprintf(stderr, "copy-latency: a process failed at %d processes\n", processes);
      return 1;
    }
    for (int method = 0; method < kMethodCount; ++method) {
      for (int size = 0; size < kSizeCount; ++size) {
        const int cell = method * kSizeCount + size;
        std::vector<float> all;
        for (int process = 0; process < processes; ++process)
          all.insert(all.end(), shared->samples[process][cell], shared->samples[process][cell] + shared->counts[process][cell]);
        std::sort(all.begin(), all.end());
        const float median = all.empty() ? 0 : all[all.size() / 2], low = all.empty() ? 0 : all[all.size() / 10];
        std::printf("%-10d %-14s %8zu %10.1f %10.1f %8zu\n", processes, kMethods[method], kSizes[size], median, low,
                    all.size());
      }
    }
    std::fflush(stdout);
    munmap(memory, sizeof(Shared));
  }
  return 0;
}
