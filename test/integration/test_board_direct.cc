// Direct reads on the board (algorithms/shared_memory/board_direct.cc), with
// ranks as threads of this process: allgather and alltoall in which each
// member copies its peers' blocks straight out of their buffers. Results
// are checked bit-exactly (allgather in place too); the trace says they ran
// as board_direct; ranks that disagree on the call fail with MismatchError. The same
// runs as separate processes in test/launch (chorus-bench --check).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "test/integration/rank_threads.h"
#include "test/integration/trace_files.h"

using namespace chorus;
using namespace std::chrono_literals;
using chorus::testing::algorithms_traced;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;

namespace {

CollectiveOptions direct() {
  CollectiveOptions options;
  options.algorithm = "board_direct";
  return options;
}

int32_t value(size_t rank, size_t block, size_t i) { return static_cast<int32_t>((rank + 1) * ((block * 7 + i) % 11 + 1)); }

}  // namespace

TEST_CASE("direct reads on the board: allgather (in place and not) and alltoall, bit-exact, at 2 to 4 ranks",
          "[board][direct]") {
  // Odd counts, past a slot and under one, so no size lines up with a page.
  for (int size : {2, 3, 4}) {
    CAPTURE(size);
    const auto directory = chorus::testing::fresh_directory("board-direct", std::to_string(size));
    const auto ranks = static_cast<size_t>(size);
    std::atomic<int> wrong{0};
    require_all_ok(run_ranks(
        size,
        [&](Context& context) {
          const auto me = static_cast<size_t>(context.rank());
          for (size_t count : {size_t{1001}, size_t{300007}}) {
            std::vector<int32_t> mine(count), all(count * ranks, -1), in_place(count * ranks, -1);
            for (size_t i = 0; i < count; ++i) mine[i] = in_place[me * count + i] = value(me, 0, i);
            allgather(context, std::span<const int32_t>(mine), std::span(all), direct());
            allgather(context, std::span(in_place), direct());
            for (size_t r = 0; r < ranks; ++r)
              for (size_t i = 0; i < count; ++i)
                if (all[r * count + i] != value(r, 0, i) || in_place[r * count + i] != value(r, 0, i)) ++wrong;

            std::vector<int32_t> input(count * ranks), received(count * ranks, -1);
            for (size_t block = 0; block < ranks; ++block)
              for (size_t i = 0; i < count; ++i) input[block * count + i] = value(me, block, i);
            alltoall(context, std::span<const int32_t>(input), std::span(received), direct());
            for (size_t r = 0; r < ranks; ++r)
              for (size_t i = 0; i < count; ++i)
                if (received[r * count + i] != value(r, me, i)) ++wrong;

          }
        },
        60s, [&](int, ConnectOptions& options) { options.trace = (directory / "trace-{rank}.json").string(); }));
    CHECK(wrong == 0);
    const std::map<std::string, int> counts = algorithms_traced(directory);
    CHECK(counts.at("allgather/board_direct") == size * 4);
    CHECK(counts.at("alltoall/board_direct") == size * 2);
    CHECK(counts.size() == 2);
  }
}

TEST_CASE("ranks whose direct allgathers differ in count fail with MismatchError naming the peer",
          "[board][direct]") {
  const auto outcomes = run_ranks(2, [&](Context& context) {
    const size_t count = context.rank() == 0 ? 4096 : 4097;
    std::vector<int32_t> mine(count, 1), all(count * 2);
    allgather(context, std::span<const int32_t>(mine), std::span(all), direct());
  });
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    INFO("rank " << rank);
    REQUIRE(outcomes[rank].error);
    try {
      std::rethrow_exception(outcomes[rank].error);
    } catch (const MismatchError& error) {
      INFO(error.what());
      CHECK(std::string(error.what()).find("peer rank " + std::to_string(1 - rank)) != std::string::npos);
    } catch (const Error& error) {
      FAIL("not a MismatchError: " << error.what());
    }
  }
}

TEST_CASE("board_direct names what it takes when asked for another collective", "[board][direct]") {
  const auto outcomes = run_ranks(2, [&](Context& context) {
    std::vector<float> data(size_t{1} << 18, 1.0f);
    broadcast(context, std::span(data), 0, direct());
  });
  for (const auto& outcome : outcomes) {
    REQUIRE(outcome.error);
    try {
      std::rethrow_exception(outcome.error);
    } catch (const Error& error) {
      INFO(error.what());
      CHECK(std::string(error.what()).find("board_direct") != std::string::npos);
    }
  }
}
