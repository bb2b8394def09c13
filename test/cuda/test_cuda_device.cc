// CUDA memory on a real GPU (suite "cuda"): the device kernels give the host
// kernels' bits for every type and op, the memory backend, memory kinds,
// staged collectives over shm and tcp with ranks sharing the GPU, and the
// ordering against the caller's stream, async included. Without a device
// the program says why and exits 77, which Meson reports as skipped.
// `--probe` only answers whether there is a device (0) or not (77).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memory/cuda/runtime.h"
#include "base/error.h"
#include "base/reduce.h"
#include "chorus/chorus.h"
#include "test/integration/rank_threads.h"

using namespace chorus;

namespace {

constexpr int kSkipped = 77;

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) FAIL(what << ": " << cudaGetErrorString(error));
}

// Device memory freed at scope end.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t size) : bytes(size) { check_cuda(cudaMalloc(&data, std::max<size_t>(size, 1)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* get() const { return static_cast<std::byte*>(data); }
  // cudaMemcpy from pageable memory may return before the DMA has landed,
  // and the backend's stream does not wait for the legacy stream's work:
  // without the synchronize its kernel can read the buffer half uploaded
  // (seen on the H100 under load).
  void upload(const void* host) const {
    check_cuda(cudaMemcpy(data, host, bytes, cudaMemcpyHostToDevice), "upload");
    check_cuda(cudaDeviceSynchronize(), "upload");
  }
  void download(void* host) const { check_cuda(cudaMemcpy(host, data, bytes, cudaMemcpyDeviceToHost), "download"); }
  void* data = nullptr;
  size_t bytes;
};

bool valid_pair(DataType type, ReduceOp op) {
  try {
    validate_reduction(type, op);
    return true;
  } catch (const InvalidArgument&) {
    return false;
  }
}

// Random bits, with the special values every float type must agree on
// (NaN, infinities, signed zeros, subnormals) mixed in.
std::vector<std::byte> random_bytes(size_t bytes, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<std::byte> data(bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t word = random();
    std::memcpy(data.data() + i, &word, std::min<size_t>(8, bytes - i));
  }
  return data;
}

bool is_nan(DataType type, const std::byte* element) {
  uint64_t bits = 0;
  std::memcpy(&bits, element, element_size(type));
  switch (type) {
    case DataType::float16: return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
    case DataType::bfloat16: return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0;
    case DataType::float32: return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu) != 0;
    case DataType::float64:
      return (bits & 0x7ff0000000000000u) == 0x7ff0000000000000u && (bits & 0xfffffffffffffu) != 0;
    default: return false;
  }
}

// Empty when the device's elements are the host's: the same bits, except
// that any NaN matches any NaN. A NaN's payload is not a value (the GPU's
// float unit returns its one canonical NaN where the x86 one passes the
// operand's payload on), every other bit is. Otherwise the first element
// that differs, with both bit patterns.
std::string difference(DataType type, const std::vector<std::byte>& device, const std::vector<std::byte>& host) {
  const size_t element = element_size(type);
  for (size_t offset = 0; offset < host.size(); offset += element) {
    if (std::memcmp(device.data() + offset, host.data() + offset, element) == 0) continue;
    if (is_nan(type, device.data() + offset) && is_nan(type, host.data() + offset)) continue;
    uint64_t device_bits = 0, host_bits = 0;
    std::memcpy(&device_bits, device.data() + offset, element);
    std::memcpy(&host_bits, host.data() + offset, element);
    char text[160];
    std::snprintf(text, sizeof text, "element %zu: device 0x%llx, host 0x%llx", offset / element,
                  static_cast<unsigned long long>(device_bits), static_cast<unsigned long long>(host_bits));
    return text;
  }
  return "";
}

const DataType all_types[] = {DataType::int8,     DataType::uint8,    DataType::int32,   DataType::uint32,
                              DataType::int64,    DataType::uint64,   DataType::float16, DataType::bfloat16,
                              DataType::float32,  DataType::float64};
const ReduceOp all_ops[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,  ReduceOp::max,
                            ReduceOp::avg, ReduceOp::band, ReduceOp::bor, ReduceOp::bxor};

}  // namespace

TEST_CASE("device reductions give the host kernels' bits for every type and op", "[cuda]") {
  MemoryBackend& backend = cuda::cuda_runtime().backend(0);
  // Odd count (a tail after the 16-byte packs), and a misaligned start
  // (the element-wise kernel).
  for (const size_t offset_elements : {size_t{0}, size_t{1}}) {
    for (DataType type : all_types) {
      const size_t element = element_size(type);
      const size_t count = 1'000'003;
      const size_t bytes = (count + offset_elements) * element;
      for (ReduceOp op : all_ops) {
        if (!valid_pair(type, op)) continue;
        INFO(to_string(type) << " " << to_string(op) << ", offset " << offset_elements);
        std::vector<std::byte> a = random_bytes(bytes, 1 + static_cast<uint64_t>(type) * 16 + static_cast<uint64_t>(op));
        const std::vector<std::byte> b = random_bytes(bytes, 1000 + static_cast<uint64_t>(type));
        DeviceBuffer device_a(bytes), device_b(bytes);
        device_a.upload(a.data());
        device_b.upload(b.data());
        const size_t skip = offset_elements * element;
        backend.reduce(type, op, device_a.get() + skip, device_b.get() + skip, count);
        reduce_into(type, op, a.data() + skip, b.data() + skip, count);
        std::vector<std::byte> from_device(bytes);
        device_a.download(from_device.data());
        CHECK(difference(type, from_device, a) == "");
        if (op == ReduceOp::avg) {
          backend.average(type, device_a.get() + skip, count, 3);
          finish_average(type, a.data() + skip, count, 3);
          device_a.download(from_device.data());
          CHECK(difference(type, from_device, a) == "");
        }
      }
    }
  }
}

TEST_CASE("the device backend copies like memmove", "[cuda]") {
  MemoryBackend& backend = cuda::cuda_runtime().backend(0);
  std::vector<uint32_t> host(1024);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(i);
  DeviceBuffer device(host.size() * 4);
  device.upload(host.data());
  backend.copy(device.get() + 16, device.get(), 2048);  // overlapping, forwards
  std::memmove(reinterpret_cast<std::byte*>(host.data()) + 16, host.data(), 2048);
  std::vector<uint32_t> back(host.size());
  device.download(back.data());
  CHECK(back == host);
  std::byte* scratch = backend.thread_scratch(1 << 20);
  CHECK(cuda::cuda_runtime().describe(scratch).kind == PointerKind::device);
}

TEST_CASE("memory kinds of pointers", "[cuda]") {
  DeviceBuffer device(64);
  CHECK(memory_of(device.get()) == Memory::cuda(0));
  std::vector<int> host(4);
  CHECK(memory_of(host.data()) == Memory::host());
  void* pinned = nullptr;
  check_cuda(cudaMallocHost(&pinned, 64), "cudaMallocHost");
  CHECK(memory_of(pinned) == Memory::host());
  cudaFreeHost(pinned);
  void* managed = nullptr;
  check_cuda(cudaMallocManaged(&managed, 64), "cudaMallocManaged");
  CHECK_THROWS_WITH(memory_of(managed), Catch::Contains("managed (unified) memory"));
  // And a collective on it fails naming the buffer.
  testing::require_all_ok(testing::run_ranks(1, [&](Context& context) {
    CollectiveOptions options;
    options.memory = Memory::cuda(0);
    CHECK_THROWS_WITH(allreduce(context, managed, managed, 4, DataType::float32, ReduceOp::sum, options),
                      Catch::Contains("rank 0: allreduce on cuda:0: its input is CUDA managed"));
  }));
  cudaFree(managed);
}

TEST_CASE("collectives on device memory of ranks sharing one GPU, checked exactly", "[cuda]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (const int size : {1, 2, 4}) {
      INFO(size << " ranks over " << transport);
      testing::require_all_ok(testing::run_ranks(
          size,
          [&](Context& context) {
            const int rank = context.rank();
            CollectiveOptions options;
            options.memory = Memory::cuda(0);
            for (const size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
              // Small integers: exact in any order.
              std::vector<float> values(count);
              for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>((i + static_cast<size_t>(rank)) % 64);
              DeviceBuffer data(count * sizeof(float));
              data.upload(values.data());
              allreduce(context, data.get(), data.get(), count, DataType::float32, ReduceOp::sum, options);
              std::vector<float> result(count);
              data.download(result.data());
              size_t wrong = 0;
              for (size_t i = 0; i < count; ++i) {
                float expected = 0;
                for (int r = 0; r < size; ++r) expected += static_cast<float>((i + static_cast<size_t>(r)) % 64);
                wrong += result[i] != expected;
              }
              CHECK(wrong == 0);
              // Broadcast and allgather, out of place.
              DeviceBuffer gathered(count * sizeof(float) * static_cast<size_t>(size));
              allgather(context, data.get(), gathered.get(), count, DataType::float32, options);
              std::vector<float> all(count * static_cast<size_t>(size));
              gathered.download(all.data());
              for (int r = 0; r < size; ++r)
                CHECK(std::memcmp(all.data() + static_cast<size_t>(r) * count, result.data(), count * 4) == 0);
              std::vector<float> from_root(count, static_cast<float>(rank));
              data.upload(from_root.data());
              broadcast(context, data.get(), count, DataType::float32, size - 1, options);
              data.download(result.data());
              CHECK(result == std::vector<float>(count, static_cast<float>(size - 1)));
            }
          },
          std::chrono::milliseconds(60000),
          [&](int, ConnectOptions& connect_options) { connect_options.transports = {transport}; }));
    }
  }
}

TEST_CASE("a collective waits for the caller's stream, and the stream for an async collective", "[cuda]") {
  testing::require_all_ok(testing::run_ranks(2, [&](Context& context) {
    const int rank = context.rank();
    const size_t count = 1 << 20;
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    DeviceBuffer data(count * sizeof(int32_t));
    check_cuda(cudaMemset(data.get(), 0, data.bytes), "cudaMemset");
    // The stream is held 200 ms by a host function, then sets every byte to
    // 1: a collective that did not wait for it would reduce zeros.
    check_cuda(cudaLaunchHostFunc(
                   stream, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }, nullptr),
               "cudaLaunchHostFunc");
    check_cuda(cudaMemsetAsync(data.get(), 1, data.bytes, stream), "cudaMemsetAsync");
    CollectiveOptions options;
    options.memory = Memory::cuda(0);
    options.cuda_stream = stream;
    allreduce(context, data.get(), data.get(), count, DataType::int32, ReduceOp::sum, options);
    std::vector<int32_t> result(count);
    data.download(result.data());
    CHECK(result == std::vector<int32_t>(count, 2 * 0x01010101));

    // Async: rank 1 comes 300 ms late, so rank 0's collective is still
    // running when rank 0's stream reaches the copy of the result. The
    // stream must wait for it, with no Work::wait before the copy.
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Work work = allreduce_async(context, data.get(), data.get(), count, DataType::int32, ReduceOp::sum, options);
    int32_t* pinned = nullptr;
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&pinned), data.bytes), "cudaMallocHost");
    check_cuda(cudaMemcpyAsync(pinned, data.get(), data.bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += pinned[i] != 4 * 0x01010101;
    CHECK(wrong == 0);
    work.wait();
    cudaFreeHost(pinned);
    cudaStreamDestroy(stream);
  }));
}

TEST_CASE("async calls of a fresh worker grow and free its buffers while the caller's stream waits", "[cuda]") {
  // A new Context's worker allocates its staging buffer during its first
  // async call, and frees it to grow during each larger one, all while the
  // caller's stream waits on the calls' flags. cudaFreeHost then waits for
  // the flag, which only that worker sets: on the H200 the stream never
  // passed (memory/cuda/deferred_frees.h). The last call is a ring over
  // device memory: its Plan runs on the device, so the worker makes its
  // scratch then, and with CHORUS_CUDA_STREAM_ORDERED=1 (gpu-test.sh's
  // `order` part) its first events.
  testing::require_all_ok(testing::run_ranks(2, [&](Context& context) {
    const int rank = context.rank();
    // Staged (under 256 KiB), each larger; then the ring's 4 MiB.
    const std::vector<size_t> counts = {5, 300, 40000, size_t{1} << 20};
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    std::vector<std::unique_ptr<DeviceBuffer>> buffers;
    for (size_t count : counts) {
      buffers.push_back(std::make_unique<DeviceBuffer>(count * sizeof(int32_t)));
      const std::vector<int32_t> values(count, rank + 1);
      buffers.back()->upload(values.data());
    }
    // The ranks share this process: every upload's device-wide synchronize
    // happens before any stream waits on a flag.
    barrier(context);
    CollectiveOptions options;
    options.memory = Memory::cuda(0);
    options.cuda_stream = stream;
    std::vector<Work> works;
    for (size_t index = 0; index < counts.size(); ++index) {
      options.algorithm = index + 1 == counts.size() ? "ring" : "auto";
      works.push_back(allreduce_async(context, buffers[index]->get(), buffers[index]->get(), counts[index],
                                      DataType::int32, ReduceOp::sum, options));
    }
    const auto started = std::chrono::steady_clock::now();
    cudaError_t state;
    while ((state = cudaStreamQuery(stream)) == cudaErrorNotReady &&
           std::chrono::steady_clock::now() - started < std::chrono::seconds(30))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (state != cudaSuccess) {
      // Stuck for good: the Works could never be waited for or dropped.
      std::fprintf(stderr, "rank %d: the caller's stream has not passed its async calls after 30 s (%s)\n", rank,
                   cudaGetErrorString(state));
      std::_Exit(1);
    }
    for (Work& work : works) work.wait();
    for (size_t index = 0; index < counts.size(); ++index) {
      std::vector<int32_t> result(counts[index]);
      buffers[index]->download(result.data());
      CHECK(result == std::vector<int32_t>(counts[index], 3));
    }
    barrier(context);  // no rank frees (a device-wide wait) while another's stream still waits
    cudaStreamDestroy(stream);
  }));
}

TEST_CASE("a caller's stream that does not get to the call is a TimeoutError, not a hang", "[cuda]") {
  testing::require_all_ok(testing::run_ranks(2, [&](Context& context) {
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    DeviceBuffer data(1024 * sizeof(int32_t));
    // The stream is held 2 s by a host function; the call may wait 300 ms.
    check_cuda(cudaLaunchHostFunc(
                   stream, [](void*) { std::this_thread::sleep_for(std::chrono::seconds(2)); }, nullptr),
               "cudaLaunchHostFunc");
    CollectiveOptions options;
    options.memory = Memory::cuda(0);
    options.cuda_stream = stream;
    options.timeout = std::chrono::milliseconds(300);
    const auto started = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(allreduce(context, data.get(), data.get(), 1024, DataType::int32, ReduceOp::sum, options),
                      Catch::Contains("rank " + std::to_string(context.rank()) +
                                      ": allreduce: the work queued on the caller's stream of cuda:0 before this "
                                      "call had not ended after 300 ms"));
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cudaStreamDestroy(stream);
  }));
}

TEST_CASE("allreduce through NCCL: one rank, and ranks sharing a GPU refused", "[cuda][nccl]") {
  testing::require_all_ok(testing::run_ranks(1, [&](Context& context) {
    std::vector<float> values(1000);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 50);
    DeviceBuffer data(values.size() * sizeof(float));
    data.upload(values.data());
    CollectiveOptions options;
    options.memory = Memory::cuda(0);
    options.algorithm = "nccl";
    allreduce(context, data.get(), data.get(), values.size(), DataType::float32, ReduceOp::sum, options);
    std::vector<float> result(values.size());
    data.download(result.data());
    CHECK(result == values);
    CHECK_THROWS_WITH(
        allreduce(context, data.get(), data.get(), values.size(), DataType::int32, ReduceOp::bxor, options),
        Catch::Contains("NCCL has no bxor reduction"));
  }));
  // Two ranks as threads of one process, both on cuda:0.
  const auto outcomes = testing::run_ranks(2, [&](Context& context) {
    DeviceBuffer data(64);
    CollectiveOptions options;
    options.memory = Memory::cuda(0);
    options.algorithm = "nccl";
    allreduce(context, data.get(), data.get(), 16, DataType::float32, ReduceOp::sum, options);
  });
  for (const auto& outcome : outcomes) {
    REQUIRE(outcome.error);
    CHECK_THROWS_WITH(std::rethrow_exception(outcome.error),
                      Catch::Contains("ranks 0 and 1 of this host both use the GPU at PCI"));
  }
}

// A measurement, not a test (hidden: scripts/gpu-test.sh runs it by tag):
// the fp32 sum kernel's rate against the device's own copy, both counted as
// bytes read plus bytes written (sum: two read, one written; copy: one and
// one), at 64 MiB. Issue 28's target is a ratio of at least 0.8.
TEST_CASE("rate of the fp32 sum kernel against a device-to-device copy", "[.][rate]") {
  MemoryBackend& backend = cuda::cuda_runtime().backend(0);
  const size_t bytes = size_t{64} << 20;
  const size_t count = bytes / 4;
  DeviceBuffer a(bytes), b(bytes), c(bytes);
  check_cuda(cudaMemset(a.data, 0, bytes), "cudaMemset");
  check_cuda(cudaMemset(b.data, 0, bytes), "cudaMemset");
  const auto seconds_per = [&](auto&& body) {
    for (int i = 0; i < 3; ++i) body();
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    double best = 1e9;
    for (int round = 0; round < 5; ++round) {
      const auto started = std::chrono::steady_clock::now();
      for (int i = 0; i < 20; ++i) body();
      check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() / 20);
    }
    return best;
  };
  const double copy = seconds_per([&] { check_cuda(cudaMemcpy(c.data, a.data, bytes, cudaMemcpyDeviceToDevice), "copy"); });
  const double sum = seconds_per([&] { backend.reduce(DataType::float32, ReduceOp::sum, a.get(), b.get(), count); });
  const double copy_rate = 2.0 * bytes / copy / 1e9, sum_rate = 3.0 * bytes / sum / 1e9;
  std::printf("64 MiB: device copy %.1f us, %.0f GB/s read+written; fp32 sum kernel %.1f us, %.0f GB/s; "
              "ratio %.2f\n", copy * 1e6, copy_rate, sum * 1e6, sum_rate, sum_rate / copy_rate);
  SUCCEED();
}

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device (%s)\n", error != cudaSuccess ? cudaGetErrorString(error) : "none found");
    return kSkipped;
  }
  if (argc > 1 && std::strcmp(argv[1], "--probe") == 0) return 0;
  return Catch::Session().run(argc, argv);
}
