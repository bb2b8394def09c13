// The executor's stream-ordered path (executor.cc, PlanRun::run) without a
// GPU: every rank's host memory is served by a backend whose copies and
// reductions, once queued, run late and in order on a thread of their own,
// as a device's stream runs kernels, and whose fences pass only when the work
// before them has run. Every Plan of the collectives with local steps runs
// over loopback TCP and is checked bit for bit. A send posted before the
// reduction it carries had run, or a receive landing in scratch a queued
// reduction still reads, gives wrong numbers here; a failed call must not
// return while its queued work may still write.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "algorithms/execution/communicator.h"
#include "algorithms/run.h"
#include "algorithms/selection/registry.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/host/host_memory.h"
#include "memory/registry.h"
#include "test/algorithms/tcp_communicators.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;
using namespace std::chrono_literals;

namespace {

// Host memory as a device's stream serves it: between begin_queueing and
// finish_queued, copies, reductions and averages run on the backend's own
// thread, in the order queued, each after a pause between `shortest` and
// `longest`;
// a fence is the number of operations queued before it and passes once
// that many have run. Outside queueing each runs at once.
class LaggingBackend final : public MemoryBackend {
 public:
  LaggingBackend(uint32_t seed, std::chrono::microseconds shortest, std::chrono::microseconds longest)
      : random_(seed), pauses_(shortest.count(), longest.count()), worker_([this] { work(); }) {}
  ~LaggingBackend() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }

  Memory memory() const override { return Memory::host(); }
  std::byte* thread_scratch(size_t bytes) override { return host_.thread_scratch(bytes); }
  std::shared_ptr<std::byte> allocate(size_t bytes) override { return host_.allocate(bytes); }
  void copy(std::byte* to, const std::byte* from, size_t bytes) override {
    submit([=, this] { host_.copy(to, from, bytes); });
  }
  void reduce(DataType type, ReduceOp op, std::byte* accumulator, const std::byte* operand, size_t count) override {
    submit([=, this] { host_.reduce(type, op, accumulator, operand, count); });
  }
  void average(DataType type, std::byte* data, size_t count, size_t ranks) override {
    submit([=, this] { host_.average(type, data, count, ranks); });
  }
  void begin_queueing() override { queueing_ = true; }
  void finish_queued() override {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return ran_.load() == queued_; });
    queueing_ = false;
  }
  bool orders_by_fences() const override { return true; }
  uint64_t record_fence() override {
    std::lock_guard lock(mutex_);
    return queued_;
  }
  bool fence_passed(uint64_t fence) override { return ran_.load(std::memory_order_acquire) >= fence; }

  // Operations queued so far, the most that waited at once, and those still waiting.
  uint64_t queued() {
    std::lock_guard lock(mutex_);
    return queued_;
  }
  size_t deepest() {
    std::lock_guard lock(mutex_);
    return deepest_;
  }
  uint64_t waiting() {
    std::lock_guard lock(mutex_);
    return queued_ - ran_.load();
  }

 private:
  void submit(std::function<void()> operation) {
    if (!queueing_) {
      operation();
      return;
    }
    {
      std::lock_guard lock(mutex_);
      waiting_.push_back(std::move(operation));
      ++queued_;
      deepest_ = std::max(deepest_, waiting_.size());
    }
    changed_.notify_all();
  }

  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
      if (waiting_.empty()) return;
      std::function<void()> operation = std::move(waiting_.front());
      waiting_.pop_front();
      const auto pause = std::chrono::microseconds(pauses_(random_));
      lock.unlock();
      std::this_thread::sleep_for(pause);
      operation();
      lock.lock();
      ran_.fetch_add(1, std::memory_order_release);
      changed_.notify_all();
    }
  }

  MemoryBackend& host_ = host_memory_backend();
  std::mt19937 random_;
  std::uniform_int_distribution<int64_t> pauses_;
  bool queueing_ = false;  // only the rank's own thread reads and writes it
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> waiting_;
  uint64_t queued_ = 0;
  std::atomic<uint64_t> ran_{0};
  size_t deepest_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

int64_t input_value(int rank, size_t index) { return static_cast<int64_t>(index % 13) - 6 + rank; }

// Runs `call` with `algorithm` on every rank, each rank's host memory lagging;
// fill(rank, input, output) prepares the buffers (input may be empty: in
// place) and check(rank, output) judges them (throwing: Catch2's macros are
// for the main thread). An algorithm that does not serve the call is skipped.
struct Buffers {
  std::vector<float> input, output;
};

// What a run_lagging did: whether the algorithm ran, and the operations
// queued on all ranks (0 where it ran: the path never did).
struct Lagged {
  bool ran = false;
  uint64_t queued = 0;
  Lagged& operator+=(const Lagged& other) {
    ran = ran || other.ran;
    queued += other.queued;
    return *this;
  }
};

Lagged run_lagging(std::vector<std::unique_ptr<Context>>& contexts, std::vector<uint32_t>& sequences,
                     const std::string& algorithm, const std::function<Call(Context&)>& make,
                     const std::function<void(int, Buffers&)>& fill,
                     const std::function<void(int, const Buffers&)>& check) {
  std::atomic<uint64_t> queued{0};
  std::atomic<bool> ran{false};
  require_no_errors(on_every_rank(contexts, [&](Context& context) {
    const int rank = context.rank();
    const Call call = make(context);
    Buffers buffers;
    fill(rank, buffers);
    const void* input = buffers.input.empty() ? buffers.output.data() : buffers.input.data();
    if (call.collective == Collective::allgather && call.in_place)
      input = buffers.output.data() + static_cast<size_t>(rank) * call.count;
    if (call.collective == Collective::broadcast) input = nullptr;
    const Call checked = checked_call(context, call, input, buffers.output.data());
    if (!find_algorithm(call.collective, algorithm)->supports(checked)) return;
    ran = true;
    LaggingBackend lagging(static_cast<uint32_t>(rank * 7919 + 1), 0us, 300us);
    {
      ScopedMemoryBackend scope(lagging);
      run_collective(context, checked, input, buffers.output.data(), algorithm, sequences[rank]++, soon());
    }
    if (lagging.waiting() != 0) throw std::runtime_error(cat("rank ", rank, ": the call returned with queued work"));
    queued.fetch_add(lagging.queued());
    check(rank, buffers);
  }));
  return Lagged{ran.load(), queued.load()};
}

void require_equal(int rank, size_t index, float value, int64_t expected) {
  const float wanted = static_cast<float>(expected);
  if (std::memcmp(&value, &wanted, sizeof value) != 0)
    throw std::runtime_error(cat("rank ", rank, " element ", index, " is ", value, ", expected ", wanted));
}

std::vector<const Algorithm*> plans_of(Collective collective) {
  std::vector<const Algorithm*> found;
  for (const Algorithm& algorithm : all_algorithms())
    if (algorithm.collective == collective) found.push_back(&algorithm);
  return found;
}

}  // namespace

TEST_CASE("stream-ordered executor: every allreduce, reduce and reduce_scatter Plan is exact when local steps end "
          "late") {
  for (int size : {2, 3, 4}) {
    auto contexts = make_contexts(size);
    std::vector<uint32_t> sequences(static_cast<size_t>(size), 0);
    for (Collective collective : {Collective::allreduce, Collective::reduce, Collective::reduce_scatter})
      for (const Algorithm* algorithm : plans_of(collective)) {
        Lagged lagged;
        // Several segments of the default tuning at the largest count.
        for (size_t count : {size_t{1009}, (size_t{3} << 18) + 5})
          for (ReduceOp op : {ReduceOp::sum, ReduceOp::max})
            for (bool in_place : {false, true}) {
              if (collective == Collective::reduce_scatter && in_place) continue;  // no Plan serves it
              const int root = size - 1;
              INFO(size << " ranks, " << to_string(collective) << " by " << algorithm->name << ", count " << count
                        << ", " << to_string(op) << (in_place ? ", in place" : ""));
              const size_t whole = collective == Collective::reduce_scatter ? count * static_cast<size_t>(size) : count;
              const auto expected = [&](size_t index) {
                const int64_t base = static_cast<int64_t>(index % 13) - 6;
                return op == ReduceOp::sum ? base * size + size * (size - 1) / 2 : base + size - 1;
              };
              lagged += run_lagging(
                  contexts, sequences, std::string(algorithm->name),
                  [&](Context& context) {
                    return make_call(context, collective, count, DataType::float32, op, root, in_place);
                  },
                  [&](int rank, Buffers& buffers) {
                    std::vector<float> data(whole);
                    for (size_t i = 0; i < whole; ++i) data[i] = static_cast<float>(input_value(rank, i));
                    if (in_place) {
                      buffers.output = std::move(data);
                    } else {
                      buffers.input = std::move(data);
                      buffers.output.assign(collective == Collective::reduce_scatter ? count : whole, -99.0f);
                    }
                  },
                  [&](int rank, const Buffers& buffers) {
                    if (collective == Collective::reduce && rank != root) return;
                    const size_t first = collective == Collective::reduce_scatter ? count * static_cast<size_t>(rank) : 0;
                    for (size_t i = 0; i < count; ++i) require_equal(rank, first + i, buffers.output[i], expected(first + i));
                  });
            }
        // Every reduction is a local step: a Plan that ran queued them.
        INFO(size << " ranks, " << to_string(collective) << " by " << algorithm->name);
        if (lagged.ran) REQUIRE(lagged.queued > 0);
      }
  }
}

TEST_CASE("stream-ordered executor: broadcast, allgather and alltoall Plans move every byte when copies end late") {
  for (int size : {2, 3, 4}) {
    auto contexts = make_contexts(size);
    std::vector<uint32_t> sequences(static_cast<size_t>(size), 0);
    for (Collective collective : {Collective::broadcast, Collective::allgather, Collective::alltoall})
      for (const Algorithm* algorithm : plans_of(collective)) {
        Lagged lagged;
        for (size_t count : {size_t{5}, (size_t{3} << 17) + 3})
          for (bool in_place : {false, true}) {
            if (collective == Collective::broadcast && !in_place) continue;
            if (collective == Collective::alltoall && in_place) continue;
            for (int root : {0, size - 1}) {
              if (collective != Collective::broadcast && root != 0) continue;
              INFO(size << " ranks, " << to_string(collective) << " by " << algorithm->name << ", count " << count
                        << (in_place ? ", in place" : "") << ", root " << root);
              const size_t blocks = collective == Collective::broadcast ? 1 : static_cast<size_t>(size);
              // Block b of rank r's output holds what rank b sent it.
              const auto sent = [&](int from, int to, size_t index) {
                if (collective == Collective::broadcast) return input_value(root, index);
                if (collective == Collective::allgather) return input_value(from, index) * 3;
                return input_value(from, index) * 3 + 100 * to;
              };
              lagged += run_lagging(
                  contexts, sequences, std::string(algorithm->name),
                  [&](Context& context) {
                    return make_call(context, collective, count, DataType::float32, ReduceOp::sum, root, in_place);
                  },
                  [&](int rank, Buffers& buffers) {
                    buffers.output.assign(count * blocks, -99.0f);
                    if (collective == Collective::broadcast) {
                      if (rank == root)
                        for (size_t i = 0; i < count; ++i) buffers.output[i] = static_cast<float>(sent(root, rank, i));
                      return;
                    }
                    if (collective == Collective::allgather) {
                      std::vector<float>& own = in_place ? buffers.output : buffers.input;
                      const size_t first = in_place ? count * static_cast<size_t>(rank) : 0;
                      if (!in_place) own.assign(count, 0.0f);
                      for (size_t i = 0; i < count; ++i) own[first + i] = static_cast<float>(sent(rank, rank, i));
                      return;
                    }
                    buffers.input.assign(count * blocks, 0.0f);
                    for (int to = 0; to < size; ++to)
                      for (size_t i = 0; i < count; ++i)
                        buffers.input[static_cast<size_t>(to) * count + i] = static_cast<float>(sent(rank, to, i));
                  },
                  [&](int rank, const Buffers& buffers) {
                    for (size_t block = 0; block < blocks; ++block)
                      for (size_t i = 0; i < count; ++i)
                        require_equal(rank, block * count + i, buffers.output[block * count + i],
                                      sent(static_cast<int>(block), rank, i));
                  });
            }
          }
        // Out of place, an allgather or alltoall copies each rank's own
        // block with a local step; a broadcast Plan may have none.
        INFO(size << " ranks, " << to_string(collective) << " by " << algorithm->name);
        if (lagged.ran && collective != Collective::broadcast) REQUIRE(lagged.queued > 0);
      }
  }
}

TEST_CASE("stream-ordered executor: a call that fails returns only once its queued work has run") {
  // Rank 1 never joins: rank 0's allgather times out while the copy of its
  // own block into the output, queued at once, still waits its long pause.
  auto contexts = make_contexts(2);
  Context& context = *contexts[0];
  const size_t count = 4096;
  std::vector<float> input(count, 1.0f), output(2 * count, -99.0f);
  const Call call = make_call(context, Collective::allgather, count, DataType::float32, ReduceOp::sum, 0, false);
  const Call checked = checked_call(context, call, input.data(), output.data());
  LaggingBackend lagging(17, 500ms, 500ms);
  bool timed_out = false;
  const auto began = std::chrono::steady_clock::now();
  {
    ScopedMemoryBackend scope(lagging);
    try {
      run_collective(context, checked, input.data(), output.data(), "ring", 0, Deadline::after(100ms));
    } catch (const TimeoutError&) {
      timed_out = true;
    }
  }
  REQUIRE(timed_out);
  REQUIRE(lagging.queued() > 0);
  REQUIRE(lagging.waiting() == 0);
  // ... and it did wait for it: the queued copy's bytes are in place.
  REQUIRE(std::chrono::steady_clock::now() - began >= 450ms);
  for (size_t i = 0; i < count; ++i) REQUIRE(output[i] == 1.0f);
}

TEST_CASE("QueuedWork left by an exception waits for the queued work, and the thread's next operation runs at once") {
  // The mapped allreduce and leader, and the executor, queue through it: a
  // failure between begin_queueing and finish_queued must neither return
  // with kernels running nor leave the backend queueing for the next call.
  LaggingBackend lagging(23, 2ms, 2ms);
  const std::vector<std::byte> source(64, std::byte{7});
  std::vector<std::byte> queued_into(64), later_into(64);
  try {
    QueuedWork queued(lagging, 0);
    lagging.copy(queued_into.data(), source.data(), source.size());
    throw std::runtime_error("a step failed");
  } catch (const std::runtime_error&) {
  }
  REQUIRE(lagging.waiting() == 0);
  REQUIRE(queued_into == source);
  lagging.copy(later_into.data(), source.data(), source.size());
  REQUIRE(later_into == source);  // not queued: the scope ended queueing
  REQUIRE(lagging.queued() == 1);
}
