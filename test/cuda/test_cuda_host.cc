// The host side of CUDA support, on any machine: the stream-flag slots, the
// stream-ordered path's fences, the staging layouts, and what a process without a CUDA device answers (a
// clear error naming the rank, the call and the reason; never a crash).
// The GPU itself is test_cuda_device.cc's (suite "cuda").
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/execution/staging.h"
#include "memory/cuda/runtime.h"
#include "memory/cuda/deferred_frees.h"
#include "memory/cuda/event_fences.h"
#include "memory/cuda/module_api.h"
#include "memory/cuda/stream_flags.h"
#include "base/error.h"
#include "chorus/chorus.h"

using namespace chorus;
using algorithms::Call;
using algorithms::Collective;
using algorithms::StagingLayout;

namespace {

struct FlagMemory {
  std::vector<std::unique_ptr<uint32_t[]>> blocks;
  cuda::StreamFlags flags{[this](size_t count) {
                            blocks.push_back(std::make_unique<uint32_t[]>(count));
                            return blocks.back().get();
                          },
                          [](uint32_t*) {}, 2};
};

Call call_of(Collective collective, int rank, int size, size_t count, int root = 0) {
  return algorithms::make_call(collective, rank, size, count, DataType::float32, ReduceOp::sum, root, false);
}

// A driver table whose events pass when the test says: an event recorded
// as the stream's n-th piece of work is done once `ran` reaches n.
struct FakeEvents {
  struct Event {
    uint64_t recorded_at = 0;
  };
  static inline std::vector<std::unique_ptr<Event>> created;
  static inline uint64_t recorded = 0, ran = 0;
  static inline size_t destroyed = 0;
  static inline const char* query_failure = nullptr;

  static cuda::ModuleApi table() {
    created.clear();
    recorded = ran = 0;
    destroyed = 0;
    query_failure = nullptr;
    cuda::ModuleApi api{};
    api.event_create = [](int, void** event) -> cuda::CudaStatus {
      created.push_back(std::make_unique<Event>());
      *event = created.back().get();
      return nullptr;
    };
    api.event_record = [](void* event, void*) -> cuda::CudaStatus {
      static_cast<Event*>(event)->recorded_at = ++recorded;
      return nullptr;
    };
    api.event_query = [](void* event, int* done) -> cuda::CudaStatus {
      if (query_failure) return query_failure;
      *done = static_cast<Event*>(event)->recorded_at <= ran ? 1 : 0;
      return nullptr;
    };
    api.event_destroy = [](void*) -> cuda::CudaStatus {
      ++destroyed;
      return nullptr;
    };
    return api;
  }
};

}  // namespace

TEST_CASE("stream fences pass in order, reuse their events, and name the device when the driver fails",
          "[cuda][host]") {
  const cuda::ModuleApi api = FakeEvents::table();
  cuda::EventFences fences(api);
  REQUIRE(fences.record(nullptr, 3) == 1);
  REQUIRE(fences.record(nullptr, 3) == 2);
  REQUIRE(fences.record(nullptr, 3) == 3);
  REQUIRE(fences.events() == 3);
  // Nothing ran: no fence passed, and asking does not wait.
  REQUIRE_FALSE(fences.passed(1, 3));
  FakeEvents::ran = 1;
  REQUIRE(fences.passed(1, 3));
  REQUIRE_FALSE(fences.passed(2, 3));
  REQUIRE_FALSE(fences.passed(3, 3));
  FakeEvents::ran = 3;
  // The last fence passes with those before it.
  REQUIRE(fences.passed(3, 3));
  REQUIRE(fences.passed(2, 3));
  REQUIRE(fences.pending() == 0);
  // Passed fences' events are reused; more in flight at once make more.
  REQUIRE(fences.record(nullptr, 3) == 4);
  REQUIRE(FakeEvents::created.size() == 3);
  for (uint64_t next = 5; next <= 8; ++next) REQUIRE(fences.record(nullptr, 3) == next);
  REQUIRE(fences.pending() == 5);
  REQUIRE(FakeEvents::created.size() == 5);
  REQUIRE_FALSE(fences.passed(4, 3));
  // A wait for the whole stream passes every fence without asking the driver.
  fences.all_passed();
  REQUIRE(fences.pending() == 0);
  REQUIRE(fences.passed(8, 3));
  REQUIRE(fences.record(nullptr, 3) == 9);
  FakeEvents::query_failure = "an illegal memory access was encountered (cudaErrorIllegalAddress)";
  REQUIRE_THROWS_MATCHES(fences.passed(9, 3), IoError,
                         Catch::Message("waiting for queued work on cuda:3: an illegal memory access was encountered "
                                        "(cudaErrorIllegalAddress)"));
  fences.release();
  REQUIRE(FakeEvents::destroyed == 5);
}

TEST_CASE("a stream flag releases its waiter and only its waiter", "[cuda][host]") {
  FlagMemory memory;
  cuda::StreamFlags& flags = memory.flags;
  const cuda::StreamFlags::Ticket first = flags.take();
  CHECK(*first.flag < first.value);  // the stream would wait
  flags.release(first);
  CHECK(*first.flag >= first.value);  // and now passes
  // The slot comes back with a larger value: the old waiter stays released,
  // the new one waits.
  const cuda::StreamFlags::Ticket again = flags.take();
  CHECK(again.flag == first.flag);
  CHECK(again.value == first.value + 1);
  CHECK(*again.flag >= first.value);
  CHECK(*again.flag < again.value);
  flags.release(again);
  CHECK(*again.flag == again.value);
}

TEST_CASE("stream flags grow by blocks when every slot is in flight", "[cuda][host]") {
  FlagMemory memory;
  cuda::StreamFlags& flags = memory.flags;
  std::vector<cuda::StreamFlags::Ticket> tickets;
  for (int i = 0; i < 5; ++i) tickets.push_back(flags.take());
  CHECK(flags.slots() == 6);
  CHECK(flags.in_use() == 5);
  CHECK(memory.blocks.size() == 3);
  std::set<uint32_t*> distinct;
  for (const auto& ticket : tickets) distinct.insert(ticket.flag);
  CHECK(distinct.size() == 5);
  // Out of order endings each release their own slot only.
  flags.release(tickets[3]);
  CHECK(*tickets[3].flag == tickets[3].value);
  for (size_t i : {0u, 1u, 2u, 4u}) CHECK(*tickets[i].flag < tickets[i].value);
  for (size_t i : {0u, 1u, 2u, 4u}) flags.release(tickets[i]);
  CHECK(flags.in_use() == 0);
}

TEST_CASE("frees wait while a stream waits on a flag, and no wait is queued during a free", "[cuda][host]") {
  std::vector<std::pair<void*, cuda::DeferredFrees::Kind>> freed;
  std::atomic<bool> freeing{false};
  std::atomic<bool> queued_during_free{false};
  cuda::DeferredFrees frees([&](void* pointer, cuda::DeferredFrees::Kind kind) {
    freeing = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    freed.emplace_back(pointer, kind);
    freeing = false;
  });
  int a = 0, b = 0, c = 0;
  frees.free(&a, cuda::DeferredFrees::Kind::device);  // no wait: at once
  REQUIRE(freed.size() == 1);
  frees.begin_wait([] {});
  frees.begin_wait([] {});
  frees.free(&b, cuda::DeferredFrees::Kind::pinned);
  frees.free(nullptr, cuda::DeferredFrees::Kind::pinned);  // nothing to free
  CHECK(freed.size() == 1);
  CHECK(frees.kept() == 1);
  frees.end_wait();
  frees.free(&c, cuda::DeferredFrees::Kind::device);  // one wait still queued
  CHECK(freed.size() == 1);
  CHECK(frees.kept() == 2);
  frees.end_wait();
  CHECK(frees.waits() == 0);
  // The next free makes the kept ones too; a wait asked for meanwhile is
  // queued only after it.
  std::thread waiter([&] {
    while (!freeing) std::this_thread::yield();
    frees.begin_wait([&] { queued_during_free = freeing.load(); });
  });
  int d = 0;
  frees.free(&d, cuda::DeferredFrees::Kind::device);
  waiter.join();
  CHECK_FALSE(queued_during_free);
  REQUIRE(freed.size() == 4);
  CHECK(freed[1] == std::make_pair(static_cast<void*>(&b), cuda::DeferredFrees::Kind::pinned));
  CHECK(freed[2] == std::make_pair(static_cast<void*>(&c), cuda::DeferredFrees::Kind::device));
  CHECK(freed[3] == std::make_pair(static_cast<void*>(&d), cuda::DeferredFrees::Kind::device));
  // A queue that throws counts no wait.
  CHECK(frees.waits() == 1);
  CHECK_THROWS_AS(frees.begin_wait([] { throw IoError("queue failed"); }), IoError);
  CHECK(frees.waits() == 1);
  frees.end_wait();
}

TEST_CASE("staging keeps in-place layouts as one range", "[cuda][host]") {
  alignas(64) static std::byte device[4096];
  SECTION("in-place allreduce: one range, input and output at the same place") {
    Call call = call_of(Collective::allreduce, 0, 2, 100);
    const StagingLayout layout = algorithms::plan_staging(call, device, device);
    CHECK(layout.bytes == 400);
    CHECK(layout.input_offset == 0);
    CHECK(layout.output_offset == 0);
    CHECK(layout.copy_in.device == device);
    CHECK(layout.copy_in.bytes == 400);
    CHECK(layout.copy_out.bytes == 400);
  }
  SECTION("out-of-place allreduce: input in, output out, apart") {
    Call call = call_of(Collective::allreduce, 0, 2, 10);
    const StagingLayout layout = algorithms::plan_staging(call, device, device + 1024);
    CHECK(layout.copy_in.device == device);
    CHECK(layout.copy_in.bytes == 40);
    CHECK(layout.copy_in_extra.bytes == 0);
    CHECK(layout.output_offset >= 40);
    CHECK(layout.output_offset % 64 == 0);
    CHECK(layout.copy_out.device == device + 1024);
    CHECK(layout.copy_out.offset == layout.output_offset);
    CHECK(layout.bytes == layout.output_offset + 40);
  }
  SECTION("in-place allgather: this rank's block inside the output") {
    Call call = call_of(Collective::allgather, 2, 4, 8);
    call.in_place = true;
    const StagingLayout layout = algorithms::plan_staging(call, device + 64, device);
    CHECK(layout.bytes == 128);
    CHECK(layout.input_offset == 64);
    CHECK(layout.output_offset == 0);
    CHECK(layout.copy_in.bytes == 128);
    CHECK(layout.copy_out.bytes == 128);
  }
  SECTION("broadcast: the root's data is read from the output buffer, a non-root's is not") {
    Call root = call_of(Collective::broadcast, 0, 3, 16);
    const StagingLayout at_root = algorithms::plan_staging(root, device, device);
    CHECK(at_root.copy_in.bytes == 64);
    Call other = call_of(Collective::broadcast, 1, 3, 16);
    const StagingLayout elsewhere = algorithms::plan_staging(other, nullptr, device);
    CHECK(elsewhere.copy_in.bytes == 0);
    CHECK(elsewhere.copy_in_extra.bytes == 0);
    CHECK(elsewhere.copy_out.bytes == 64);
  }
  SECTION("reduce on a non-root: no output at all") {
    Call call = call_of(Collective::reduce, 1, 2, 16);
    const StagingLayout layout = algorithms::plan_staging(call, device, nullptr);
    CHECK(layout.copy_in.bytes == 64);
    CHECK(layout.copy_out.bytes == 0);
  }
}

TEST_CASE("CUDA memory without a CUDA device is a clear error", "[cuda][host]") {
  const auto directory = std::filesystem::temp_directory_path() / ("chorus-cuda-host-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  ConnectOptions connect_options;
  connect_options.timeout = std::chrono::seconds(10);
  auto context = connect_to_store("file://" + directory.string(), 0, 1, "cuda-host", connect_options);
  std::vector<float> data(16, 1.0f);
  CHECK(memory_of(data.data()) == Memory::host());
  CHECK(memory_of(nullptr) == Memory::host());

  int devices = 0;
  std::string unavailable;
  try {
    devices = cuda::cuda_runtime().device_count();
    if (devices == 0) unavailable = cuda::cuda_runtime().no_device_reason();
  } catch (const InvalidArgument& error) {
    unavailable = error.what();  // a build without CUDA
  }
  if (devices > 0) {
    // The GPU suite covers a machine with a device; here: host memory named
    // as CUDA memory is refused, naming the buffer.
    CollectiveOptions options;
    options.memory = Memory::cuda(0);
    try {
      allreduce(*context, data.data(), data.data(), data.size(), DataType::float32, ReduceOp::sum, options);
      FAIL("host memory passed as cuda:0 was accepted");
    } catch (const InvalidArgument& error) {
      CHECK_THAT(error.what(), Catch::Contains("rank 0: allreduce on cuda:0: its input is host memory"));
    }
  } else {
    CHECK_FALSE(unavailable.empty());
    CollectiveOptions options;
    options.memory = Memory::cuda(0);
    try {
      allreduce(*context, data.data(), data.data(), data.size(), DataType::float32, ReduceOp::sum, options);
      FAIL("a collective on cuda:0 ran without a CUDA device");
    } catch (const InvalidArgument& error) {
      CHECK_THAT(error.what(), Catch::Contains("rank 0: allreduce on cuda:0"));
      CHECK_THAT(error.what(), Catch::Contains(unavailable));
    }
  }
  context.reset();
  std::filesystem::remove_all(directory);
}

TEST_CASE("allreduce through NCCL wants CUDA memory", "[cuda][host]") {
  const auto directory = std::filesystem::temp_directory_path() / ("chorus-cuda-nccl-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  auto context = connect_to_store("file://" + directory.string(), 0, 1, "cuda-nccl", {});
  std::vector<float> data(4, 1.0f);
  CollectiveOptions options;
  options.algorithm = "nccl";
  CHECK_THROWS_WITH(allreduce(*context, data.data(), data.data(), data.size(), DataType::float32, ReduceOp::sum, options),
                    Catch::Contains("rank 0: allreduce with algorithm nccl needs CUDA memory (the options say host)"));
  // NCCL runs at once, async or not: the error comes from the call, not from Work::wait.
  context = connect_to_store("file://" + directory.string(), 0, 1, "cuda-nccl-async", {});
  CHECK_THROWS_WITH(
      allreduce_async(*context, data.data(), data.data(), data.size(), DataType::float32, ReduceOp::sum, options),
      Catch::Contains("rank 0: allreduce with algorithm nccl needs CUDA memory (the options say host)"));
  context.reset();
  std::filesystem::remove_all(directory);
}
