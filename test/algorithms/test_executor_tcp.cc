// The Executor on real sockets: run_collective on Contexts connected over
// loopback TCP, one thread per rank. Data is checked bit for bit; timeouts,
// a peer aborting mid-call, mismatched calls and bad arguments must give the
// promised errors, never a hang.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "algorithms/selection/registry.h"
#include "algorithms/run.h"
#include "algorithms/execution/communicator.h"
#include "base/error.h"
#include "test/algorithms/tcp_communicators.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;
using namespace std::chrono_literals;

TEST_CASE("executor: allreduce over TCP, in and out of place, small to multi-segment") {
  for (int size : {1, 2, 3, 5}) {
    auto contexts = make_contexts(size);
    std::vector<uint32_t> sequences(size, 0);
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}, size_t{1} << 20})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg})
        for (bool in_place : {true, false}) {
          INFO(size << " ranks, count " << count << " " << to_string(op) << (in_place ? " in place" : ""));
          require_no_errors(on_every_rank(contexts, [&](Context& context) {
            const int rank = context.rank();
            std::vector<float> input(count), output(count, -99.0f);
            // Rank-dependent small integers; the rank offsets cancel in the average.
            for (size_t i = 0; i < count; ++i)
              input[i] = static_cast<float>(static_cast<int>(i % 13) - 6 +
                                            (op == ReduceOp::avg ? (rank == 0 ? -(size - 1) : 1) : rank));
            if (in_place) output = input;
            Call call = make_call(context, Collective::allreduce, count, DataType::float32, op, 0, in_place);
            run_checked(context, call, in_place ? output.data() : input.data(), output.data(), "auto",
                        sequences[rank]++, soon());
            for (size_t i = 0; i < count; ++i) {
              const float base = static_cast<float>(static_cast<int>(i % 13) - 6);
              float expected = base;
              if (op == ReduceOp::sum) expected = base * size + static_cast<float>(size * (size - 1) / 2);
              if (op == ReduceOp::max) expected = base + static_cast<float>(size - 1);
              if (std::memcmp(&output[i], &expected, sizeof(float)) != 0)
                FAIL("rank " << rank << " element " << i << " is " << output[i] << ", expected " << expected);
            }
          }));
        }
  }
}

TEST_CASE("executor: broadcast from every root and barriers over TCP, repeated") {
  const int size = 4;
  auto contexts = make_contexts(size);
  std::vector<uint32_t> sequences(size, 0);
  for (int round = 0; round < 3; ++round)
    for (int root = 0; root < size; ++root)
      for (size_t count : {size_t{0}, size_t{5}, size_t{300007}}) {
        INFO("root " << root << " count " << count);
        require_no_errors(on_every_rank(contexts, [&](Context& context) {
          const int rank = context.rank();
          std::vector<int32_t> data(count, rank == root ? 0 : -1);
          if (rank == root)
            for (size_t i = 0; i < count; ++i) data[i] = static_cast<int32_t>(i * 7 + root + round);
          Call call = make_call(context, Collective::broadcast, count, DataType::int32, ReduceOp::sum, root, true);
          run_checked(context, call, nullptr, data.data(), "binomial", sequences[rank]++, soon());
          for (size_t i = 0; i < count; ++i)
            if (data[i] != static_cast<int32_t>(i * 7 + root + round))
              FAIL("rank " << rank << " element " << i << " is " << data[i]);
          Call barrier = make_call(context, Collective::barrier, 0, DataType::int8, ReduceOp::sum, 0, true);
          run_checked(context, barrier, nullptr, nullptr, "auto", sequences[rank]++, soon());
        }));
      }
}

TEST_CASE("executor: chain broadcast cuts segments from the transport's link model, over TCP") {
  // A cheap alpha on a slow link: the smallest segments; then the same-host
  // model's large ones for the same call in the same process (the plan cache
  // must not hand one model's plan to the other).
  const LinkModel slow{.alpha_seconds = 1e-6, .beta_seconds_per_byte = 8e-9};
  const LinkModel fast{.alpha_seconds = 70e-6, .beta_seconds_per_byte = 0.5e-9};
  const size_t count = (size_t{3} << 20) / 4 + 3;
  const Algorithm& chain = *find_algorithm(Collective::broadcast, "chain");
  const Call shape = make_call(Collective::broadcast, 0, 4, count, DataType::float32, ReduceOp::sum, 1, true);
  REQUIRE(plan_tuning(chain, shape, CostModel::from_link(slow)).segment_bytes == 16 * 1024);
  REQUIRE(plan_tuning(chain, shape, CostModel::from_link(fast)).segment_bytes == 256 * 1024);
  for (const LinkModel& model : {slow, fast, slow}) {
    auto contexts = make_contexts(4, 20s, model);
    std::vector<uint32_t> sequences(4, 0);
    for (int root = 0; root < 4; ++root) {
      INFO("alpha " << model.alpha_seconds << " s, root " << root);
      require_no_errors(on_every_rank(contexts, [&](Context& context) {
        const int rank = context.rank();
        std::vector<float> data(count, -1.0f);
        if (rank == root)
          for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i * 7 + root) % 100003);
        Call call = make_call(context, Collective::broadcast, count, DataType::float32, ReduceOp::sum, root, true);
        run_checked(context, call, nullptr, data.data(), "chain", sequences[rank]++, soon());
        for (size_t i = 0; i < count; ++i)
          if (data[i] != static_cast<float>((i * 7 + root) % 100003))
            FAIL("rank " << rank << " element " << i << " is " << data[i]);
      }));
    }
  }
}

TEST_CASE("executor: a barrier holds every rank until the last one arrives") {
  const int size = 5;
  auto contexts = make_contexts(size);
  std::atomic<int> arrived{0};
  std::atomic<bool> left_early{false};
  require_no_errors(on_every_rank(contexts, [&](Context& context) {
    if (context.rank() == 3) std::this_thread::sleep_for(200ms);
    arrived.fetch_add(1);
    Call barrier = make_call(context, Collective::barrier, 0, DataType::int8, ReduceOp::sum, 0, true);
    run_checked(context, barrier, nullptr, nullptr, "dissemination", 0, soon());
    if (arrived.load() != size) left_early = true;
  }));
  REQUIRE_FALSE(left_early);
}

TEST_CASE("executor: a rank that never joins gives a TimeoutError naming the peer, and aborts the mesh") {
  auto contexts = make_contexts(2);
  std::atomic<bool> timed_out{false};
  auto errors = on_every_rank(contexts, [&](Context& context) {
    if (context.rank() == 1) {
      // Stays connected but silent until rank 0 gave up.
      while (!timed_out) std::this_thread::sleep_for(5ms);
      return;
    }
    std::vector<float> data(1000, 1.0f);
    Call call = make_call(context, Collective::allreduce, 1000, DataType::float32, ReduceOp::sum, 0, true);
    try {
      // Set well before the call begins: the message still gives the
      // timeout the call had, not the 250 ms it waited itself.
      const Deadline deadline = Deadline::after(300ms);
      std::this_thread::sleep_for(50ms);
      run_checked(context, call, data.data(), data.data(), "ring", 7, deadline);
    } catch (...) {
      timed_out = true;
      throw;
    }
    timed_out = true;
  });
  REQUIRE(errors[0] != nullptr);
  REQUIRE_THROWS_AS(std::rethrow_exception(errors[0]), TimeoutError);
  REQUIRE_THROWS_WITH(std::rethrow_exception(errors[0]),
                      Catch::Contains("rank 0: timed out after 300 ms in allreduce #7") &&
                          Catch::Contains("count 1000 float32 sum") &&
                          Catch::Contains("waiting for recv of slot 0 from rank 1 (2000 bytes)"));
  REQUIRE(contexts[0]->mesh().failure() != nullptr);
  // Every later call on the aborted device fails at once instead of hanging.
  std::vector<float> data(10, 1.0f);
  Call call = make_call(*contexts[0], Collective::allreduce, 10, DataType::float32, ReduceOp::sum, 0, true);
  REQUIRE_THROWS_AS(run_checked(*contexts[0], call, data.data(), data.data(), "auto", 8, soon()), Error);
}

TEST_CASE("executor: a peer aborting mid-call fails the others quickly") {
  auto contexts = make_contexts(3);
  const auto started = std::chrono::steady_clock::now();
  auto errors = on_every_rank(contexts, [&](Context& context) {
    if (context.rank() == 2) {
      std::this_thread::sleep_for(100ms);
      context.mesh().abort(std::make_exception_ptr(Aborted("rank 2: test abort")));
      return;
    }
    std::vector<float> data(1 << 16, 1.0f);
    Call call = make_call(context, Collective::allreduce, data.size(), DataType::float32, ReduceOp::sum, 0, true);
    run_checked(context, call, data.data(), data.data(), "auto", 0, soon());
  });
  REQUIRE(std::chrono::steady_clock::now() - started < 10s);
  for (int rank : {0, 1}) {
    INFO("rank " << rank);
    REQUIRE(errors[rank] != nullptr);
    REQUIRE_THROWS_AS(std::rethrow_exception(errors[rank]), Error);
  }
}

TEST_CASE("executor: ranks calling different allreduces get a MismatchError") {
  auto contexts = make_contexts(2);
  auto errors = on_every_rank(contexts, [&](Context& context) {
    const size_t count = context.rank() == 0 ? 10 : 11;
    std::vector<float> data(count, 1.0f);
    Call call = make_call(context, Collective::allreduce, count, DataType::float32, ReduceOp::sum, 0, true);
    run_checked(context, call, data.data(), data.data(), "auto", 0, soon());
  });
  bool mismatch_seen = false;
  for (const auto& error : errors) {
    REQUIRE(error != nullptr);
    try {
      std::rethrow_exception(error);
    } catch (const MismatchError&) {
      mismatch_seen = true;
    } catch (const Error&) {
    }
  }
  REQUIRE(mismatch_seen);
}

TEST_CASE("executor: bad arguments are rejected before anything is sent") {
  auto contexts = make_contexts(2);
  Context& context = *contexts[0];
  std::vector<float> data(4, 1.0f);
  Call allreduce = make_call(context, Collective::allreduce, 4, DataType::float32, ReduceOp::sum, 0, true);
  REQUIRE_THROWS_WITH(run_checked(context, allreduce, data.data(), data.data(), "tree", 0, soon()),
                      Catch::Contains("unknown allreduce algorithm 'tree'") && Catch::Contains("valid: ring"));
  Call bitwise = allreduce;
  bitwise.op = ReduceOp::bxor;
  REQUIRE_THROWS_AS(run_checked(context, bitwise, data.data(), data.data(), "auto", 0, soon()), InvalidArgument);
  Call broadcast = make_call(context, Collective::broadcast, 4, DataType::float32, ReduceOp::sum, 2, true);
  REQUIRE_THROWS_AS(run_checked(context, broadcast, nullptr, data.data(), "auto", 0, soon()), InvalidArgument);
  REQUIRE_THROWS_AS(run_checked(context, allreduce, nullptr, nullptr, "auto", 0, soon()), InvalidArgument);
  REQUIRE(context.mesh().failure() == nullptr);
}
