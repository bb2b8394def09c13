// A board on every host of a Context that spans hosts
// (algorithms/shared_memory/host_boards.h), with ranks as threads of this
// process on hosts faked through ConnectOptions::host_id: small allreduces
// bit-exact on 2 and 3 hosts, every op the rails must sum and divide once;
// refused by name where the hosts are uneven or the call too large; taken
// by auto for small calls once the Context's first call set it up; and a
// host peer on messages, a rail peer on another Plan, or a rank that never
// comes fail every rank, naming the Context's ranks, not the board's.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "test/integration/rank_threads.h"
#include "test/integration/trace_files.h"

using namespace chorus;
using namespace std::chrono_literals;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;

namespace {

// Hosts "0-host", "1-host", ..., host h holding layout[h] consecutive ranks.
std::function<void(int, ConnectOptions&)> on_hosts(const std::vector<int>& layout) {
  std::vector<std::string> host_of;
  for (size_t host = 0; host < layout.size(); ++host)
    for (int r = 0; r < layout[host]; ++r) host_of.push_back(std::to_string(host) + "-host");
  return [host_of](int rank, ConnectOptions& options) { options.host_id = host_of[static_cast<size_t>(rank)]; };
}

int ranks_of(const std::vector<int>& layout) {
  int size = 0;
  for (int ranks : layout) size += ranks;
  return size;
}

// Rank r's value at element i of check `round`: small integers, exact in any order.
int value(int rank, size_t i, int round) { return (rank + 1) * static_cast<int>((i + static_cast<size_t>(round)) % 5 + 1); }

CollectiveOptions named(const char* algorithm) {
  CollectiveOptions options;
  options.algorithm = algorithm;
  return options;
}

std::string error_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

template <class Error>
bool is(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

TEST_CASE("hierarchical_board: small allreduces on every host's board and across the rails are exact",
          "[host_boards]") {
  for (const std::vector<int>& layout : {std::vector<int>{2, 2}, std::vector<int>{2, 2, 2}, std::vector<int>{3, 3}}) {
    const int size = ranks_of(layout);
    CAPTURE(size, layout.size());
    std::atomic<int> wrong{0};
    require_all_ok(run_ranks(
        size,
        [&](Context& context) {
          const int rank = context.rank();
          const CollectiveOptions options = named("hierarchical_board");
          for (int round = 0; round < 4; ++round)
            for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{100}, size_t{512}}) {
              std::vector<float> input(count), output(count);
              std::vector<int32_t> maxima(count);
              std::vector<double> averages(count);
              for (size_t i = 0; i < count; ++i) {
                input[i] = static_cast<float>(value(rank, i, round));
                maxima[i] = value(rank, i, round);
                averages[i] = value(rank, i, round);
              }
              allreduce(context, input.data(), output.data(), count, DataType::float32, ReduceOp::sum, options);
              allreduce(context, std::span(maxima), ReduceOp::max, options);
              allreduce(context, std::span(averages), ReduceOp::avg, options);
              for (size_t i = 0; i < count; ++i) {
                const int unit = static_cast<int>((i + static_cast<size_t>(round)) % 5 + 1);
                if (output[i] != static_cast<float>(size * (size + 1) / 2 * unit)) ++wrong;
                if (maxima[i] != size * unit) ++wrong;
                if (averages[i] != (size + 1) / 2.0 * unit) ++wrong;
              }
            }
          // auto may take it or not (the cost model's call), but is exact either way.
          std::vector<float> data(3, static_cast<float>(rank + 1));
          allreduce(context, std::span(data), ReduceOp::sum);
          for (float x : data)
            if (x != static_cast<float>(size * (size + 1) / 2)) ++wrong;
        },
        30s, on_hosts(layout)));
    CHECK(wrong == 0);
  }
}

// The broadcast: the root's rail across hosts, then every host's board
// (host_boards.cc), from every root, on the ring (up to 1 KiB) and the
// slots (past it).
TEST_CASE("hierarchical_board: broadcasts from every root through the rails and the boards are exact",
          "[host_boards]") {
  for (const std::vector<int>& layout : {std::vector<int>{2, 2}, std::vector<int>{2, 2, 2}, std::vector<int>{3, 3}}) {
    const int size = ranks_of(layout);
    CAPTURE(size, layout.size());
    std::atomic<int> wrong{0};
    require_all_ok(run_ranks(
        size,
        [&](Context& context) {
          const int rank = context.rank();
          const CollectiveOptions options = named("hierarchical_board");
          for (int round = 0; round < 3; ++round)
            for (size_t count : {size_t{1}, size_t{7}, size_t{256}, size_t{300}, size_t{1024}})
              for (int root = 0; root < size; ++root) {
                std::vector<float> data(count);
                for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(value(rank, i, round));
                broadcast(context, std::span(data), root, options);
                for (size_t i = 0; i < count; ++i)
                  if (data[i] != static_cast<float>(value(root, i, round))) ++wrong;
              }
        },
        30s, on_hosts(layout)));
    CHECK(wrong == 0);
  }
}

// The first call of a Context on hosts of equal size sets the boards up
// and measures them (host_boards.h); from then on auto prices the
// candidate, and a host board's call (about a microsecond) with one remote
// round beats every Plan on messages, whose local rounds cost a message each.
TEST_CASE("auto takes hierarchical_board for small allreduces on hosts of equal size, Plans past the board",
          "[host_boards]") {
  const auto directory = chorus::testing::fresh_directory("host-boards", "auto");
  const std::string path = (directory / "trace-{rank}.json").string();
  constexpr size_t kSmall = 16, kLarge = 64 * 1024;  // floats: 64 bytes, and past CHORUS_BOARD_BYTES
  std::atomic<int> wrong{0};
  require_all_ok(run_ranks(
      4,
      [&](Context& context) {
        for (size_t count : {kSmall, kLarge}) {
          std::vector<float> data(count);
          for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(value(context.rank(), i, 0));
          for (int repeat = 0; repeat < 3; ++repeat) {
            std::vector<float> result(count);
            allreduce(context, data.data(), result.data(), count, DataType::float32, ReduceOp::sum);
            for (size_t i = 0; i < count; ++i) {
              float expected = 0;
              for (int rank = 0; rank < 4; ++rank) expected += static_cast<float>(value(rank, i, 0));
              if (result[i] != expected) ++wrong;
            }
          }
        }
      },
      30s,
      [&](int rank, ConnectOptions& options) {
        on_hosts({2, 2})(rank, options);
        options.trace = path;
      }));
  CHECK(wrong == 0);
  const std::map<std::string, int> ran = chorus::testing::algorithms_traced(directory, /*with_bytes=*/true);
  std::string traced;
  for (const auto& [key, calls] : ran) traced += key + ": " + std::to_string(calls) + "; ";
  INFO("calls traced: " << traced);
  REQUIRE(ran.count("allreduce/64/hierarchical_board") == 1);
  CHECK(ran.at("allreduce/64/hierarchical_board") == 4 * 3);
  for (const auto& [key, calls] : ran) CHECK(key.find("/262144/hierarchical_board") == std::string::npos);
}

TEST_CASE("hierarchical_board is refused by name on uneven hosts, on one host and past CHORUS_BOARD_BYTES",
          "[host_boards]") {
  struct Refusal {
    std::vector<int> layout;
    size_t count;
    const char* says;
  };
  const std::vector<Refusal> refusals = {Refusal{{1, 2}, 2, "each holding the same number"},
                                 Refusal{{3, 1}, 2, "each holding the same number"},
                                 Refusal{{4}, 2, "two hosts or more"},
                                 Refusal{{2, 2}, 2048, "allreduces of up to 4096 bytes (this call: 8192 bytes)"}};
  for (const Refusal& refusal : refusals) {
    const int size = ranks_of(refusal.layout);
    CAPTURE(size, refusal.count);
    const auto outcomes = run_ranks(
        size,
        [&](Context& context) {
          std::vector<float> data(refusal.count, 1.0f);
          allreduce(context, std::span(data), ReduceOp::sum, named("hierarchical_board"));
        },
        20s, on_hosts(refusal.layout));
    for (int rank = 0; rank < size; ++rank) {
      const auto& error = outcomes[static_cast<size_t>(rank)].error;
      REQUIRE(error);
      CHECK(is<InvalidArgument>(error));
      CHECK_THAT(error_text(error), Catch::Contains("'hierarchical_board'") && Catch::Contains(refusal.says));
    }
  }
}

TEST_CASE("hierarchical_board: a host peer that runs the call on messages is a mismatch, named by its rank",
          "[host_boards]") {
  const auto started = std::chrono::steady_clock::now();
  // Hosts {0, 1} and {2, 3}: rank 3 runs the call on messages, while rank 2,
  // on its host, waits for it on the board. (The boards are set up in the
  // first call that names them, which all ranks make.)
  const auto outcomes = run_ranks(
      4,
      [&](Context& context) {
        std::vector<float> data(2, 1.0f);
        allreduce(context, std::span(data), ReduceOp::sum, named("hierarchical_board"));
        allreduce(context, std::span(data), ReduceOp::sum,
                  named(context.rank() == 3 ? "recursive_doubling" : "hierarchical_board"));
      },
      20s, on_hosts({2, 2}));
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  const std::string text = outcomes[2].error ? error_text(outcomes[2].error) : "";
  INFO("rank 2: " << text);
  CHECK(is<MismatchError>(outcomes[2].error));
  CHECK_THAT(text, Catch::Contains("runs it on messages") && Catch::Contains("ranks 2, 3"));
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    CHECK(outcomes[static_cast<size_t>(rank)].error);
  }
}

TEST_CASE("hierarchical_board: a rank that never calls is named by its Context rank in the others' timeouts",
          "[host_boards]") {
  std::atomic<int> failed{0};
  const auto outcomes = run_ranks(
      4,
      [&](Context& context) {
        std::vector<float> data(2, 1.0f);
        allreduce(context, std::span(data), ReduceOp::sum, named("hierarchical_board"));
        if (context.rank() == 3) {
          while (failed.load() < 3) std::this_thread::sleep_for(10ms);
          return;
        }
        try {
          allreduce(context, std::span(data), ReduceOp::sum, named("hierarchical_board"));
        } catch (...) {
          ++failed;
          throw;
        }
      },
      3000ms, on_hosts({2, 2}));
  // Rank 2 waits for rank 3 on their host's board, which numbers them 0
  // and 1, or has rank 1's report (below) first: the words name the
  // Context's ranks all the same ("rank 3", never "rank 1" for it).
  const std::string text = outcomes[2].error ? error_text(outcomes[2].error) : "";
  INFO("rank 2: " << text);
  CHECK(is<TimeoutError>(outcomes[2].error));
  CHECK_THAT(text, Catch::Contains("allreduce #") && Catch::Contains("this Context's ranks 2, 3") &&
                       Catch::Contains("rank 3"));
  // Rank 1 waits for rank 3 on their rail (members 0 and 1 of it), or has
  // rank 2's report first: either way rank 3 is named, as itself.
  const std::string rail_text = outcomes[1].error ? error_text(outcomes[1].error) : "";
  INFO("rank 1: " << rail_text);
  CHECK_THAT(rail_text, Catch::Contains("rank 3"));
  for (int rank : {0, 1}) {
    INFO("rank " << rank);
    CHECK(outcomes[static_cast<size_t>(rank)].error);
  }
}

// A broadcast whose hosts each name a root of their own (ranks 0 and 1
// name 0, ranks 2 and 3 name 2) finishes on every rank: each root only
// sends. The next call carries the root each rank named (Call::
// previous_root), and its phases must carry it too, or the host boards
// (which each host agrees on) and the rails would let the disagreement
// pass for good: this was a silent wrong answer before stop 61.
TEST_CASE("hierarchical_board: the call after a broadcast whose hosts named different roots fails every rank",
          "[host_boards][roots]") {
  const auto outcomes = run_ranks(
      4,
      [&](Context& context) {
        std::vector<float> data(2, 1.0f);
        allreduce(context, std::span(data), ReduceOp::sum, named("hierarchical_board"));
        broadcast(context, std::span(data), context.rank() < 2 ? 0 : 2);
        allreduce(context, std::span(data), ReduceOp::sum, named("hierarchical_board"));
      },
      20s, on_hosts({2, 2}));
  for (int rank = 0; rank < 4; ++rank) {
    const std::string text = outcomes[static_cast<size_t>(rank)].error
                                 ? error_text(outcomes[static_cast<size_t>(rank)].error)
                                 : "";
    INFO("rank " << rank << ": " << text);
    REQUIRE(outcomes[static_cast<size_t>(rank)].error);
    CHECK(is<MismatchError>(outcomes[static_cast<size_t>(rank)].error));
  }
  // Rails cross the hosts: their words name both roots.
  std::string words;
  for (const auto& outcome : outcomes)
    if (outcome.error) words += error_text(outcome.error) + "\n";
  INFO(words);
  CHECK_THAT(words, Catch::Contains("root 0") && Catch::Contains("root 2"));
}

// Ranks 0, 1 and 2 name root 0; rank 3 names root 2, whose local rank is
// root 0's: rank 2 takes root 0's data off the rail and puts it on host
// 1's board, and rank 3, which reads it there, sees a slot that names
// root 0 (the board shows the Context's root, not the local one).
TEST_CASE("hierarchical_board broadcast: a rank naming another root of the same local rank fails in the call",
          "[host_boards][roots]") {
  const auto started = std::chrono::steady_clock::now();
  const auto outcomes = run_ranks(
      4,
      [&](Context& context) {
        std::vector<float> data(2, static_cast<float>(context.rank()));
        broadcast(context, std::span(data), context.rank() == 3 ? 2 : 0, named("hierarchical_board"));
      },
      20s, on_hosts({2, 2}));
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  const std::string text = outcomes[3].error ? error_text(outcomes[3].error) : "";
  INFO("rank 3: " << text);
  CHECK(is<MismatchError>(outcomes[3].error));
  CHECK_THAT(text, Catch::Contains("names root 0 but this rank names root 2") &&
                       Catch::Contains("this Context's ranks 2, 3"));
}

// Rank 3 names root 1: it waits on rail 1 for rank 1, which names root 0
// and is not on that rail. Nothing arrives there; its wait tells the
// Context's neighbour (rank 0) its root after 10 ms, and rank 0, waiting
// for rank 3 in the next call, finds the disagreement: every rank fails,
// long before the timeout.
TEST_CASE("hierarchical_board broadcast: a rail member that waits for a rank off the rail fails every rank",
          "[host_boards][roots]") {
  const auto started = std::chrono::steady_clock::now();
  const auto outcomes = run_ranks(
      4,
      [&](Context& context) {
        std::vector<float> data(2, static_cast<float>(context.rank()));
        broadcast(context, std::span(data), context.rank() == 3 ? 1 : 0, named("hierarchical_board"));
        allreduce(context, std::span(data), ReduceOp::sum);
      },
      20s, on_hosts({2, 2}));
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  std::string words;
  for (int rank = 0; rank < 4; ++rank) {
    const auto& error = outcomes[static_cast<size_t>(rank)].error;
    INFO("rank " << rank << ": " << (error ? error_text(error) : ""));
    REQUIRE(error);
    CHECK(is<MismatchError>(error));
    words += error_text(error) + "\n";
  }
  INFO(words);
  CHECK_THAT(words, Catch::Contains("root 1") && Catch::Contains("root 0"));
}
