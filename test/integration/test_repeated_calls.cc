// A Context runs a blocking call of a shape it ran just before from a
// record of that call and its choice (ContextState::RepeatedCall in
// api/context_state.h), without building the call or looking its choice
// up. A record that stood in for a call of another shape would run the
// wrong algorithm, root or layout: these tests change one field at a time
// between calls (count, root, in place, type, operator, algorithm), cycle
// through more shapes than there are records, and mix in async calls, and
// check every result bit-exactly and, in the trace, every algorithm run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "test/integration/rank_threads.h"
#include "test/integration/trace_files.h"

using namespace chorus;
using chorus::testing::algorithms_traced;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;

namespace {

CollectiveOptions named(const char* algorithm) {
  CollectiveOptions options;
  options.algorithm = algorithm;
  return options;
}

// Small integers: every sum is exact in any order.
int32_t value_of(int rank, size_t i, int round) { return (rank + 1) * static_cast<int32_t>((i + round) % 7 + 1); }

// The calls of one round on `context`, each checked: the number of wrong elements.
class Round {
 public:
  Round(Context& context, int round) : context_(context), round_(round), rank_(context.rank()), size_(context.size()) {}

  // An allreduce of `count` float32 or int32 (sum), in place or not, by `algorithm`.
  int allreduce_of(size_t count, bool in_place, bool as_float, const char* algorithm) {
    std::vector<int32_t> ints(count), int_output(count);
    std::vector<float> floats(count), float_output(count);
    for (size_t i = 0; i < count; ++i) floats[i] = static_cast<float>(ints[i] = value_of(rank_, i, round_));
    const CollectiveOptions options = named(algorithm);
    if (as_float)
      allreduce(context_, floats.data(), in_place ? floats.data() : float_output.data(), count, DataType::float32,
                ReduceOp::sum, options);
    else
      allreduce(context_, ints.data(), in_place ? ints.data() : int_output.data(), count, DataType::int32,
                ReduceOp::sum, options);
    int wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      const int32_t expected = size_ * (size_ + 1) / 2 * static_cast<int32_t>((i + round_) % 7 + 1);
      const double got = as_float ? (in_place ? floats[i] : float_output[i]) : (in_place ? ints[i] : int_output[i]);
      if (got != expected) ++wrong;
    }
    return wrong;
  }

  int broadcast_from(int root, size_t count, const char* algorithm) {
    std::vector<int32_t> data(count, rank_ == root ? round_ * 10 + root : -1);
    broadcast(context_, std::span(data), root, named(algorithm));
    int wrong = 0;
    for (int32_t value : data)
      if (value != round_ * 10 + root) ++wrong;
    return wrong;
  }

  int reduce_to(int root, size_t count, ReduceOp op) {
    std::vector<int32_t> input(count), output(count, -1);
    for (size_t i = 0; i < count; ++i) input[i] = value_of(rank_, i, round_);
    reduce(context_, std::span<const int32_t>(input), std::span(output), op, root);
    if (rank_ != root) return 0;
    int wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      const auto step = static_cast<int32_t>((i + round_) % 7 + 1);
      if (output[i] != (op == ReduceOp::max ? size_ * step : size_ * (size_ + 1) / 2 * step)) ++wrong;
    }
    return wrong;
  }

 private:
  Context& context_;
  const int round_, rank_, size_;
};

}  // namespace

TEST_CASE("a call that repeats an earlier one's shape but one field runs as itself, bit-exact, on the algorithm "
          "it names",
          "[repeated]") {
  constexpr int kRounds = 40;
  for (int size : {2, 3}) {
    CAPTURE(size);
    const auto directory = chorus::testing::fresh_directory("repeated", "fields-" + std::to_string(size));
    std::atomic<int> wrong{0};
    require_all_ok(run_ranks(
        size,
        [&](Context& context) {
          for (int round = 0; round < kRounds; ++round) {
            Round calls(context, round);
            // Three shapes, twice each: the records hold them, and the second runs from one.
            for (int twice = 0; twice < 2; ++twice) {
              wrong += calls.allreduce_of(64, false, true, "board");
              wrong += calls.allreduce_of(64, false, true, "ring");  // only the algorithm differs
              wrong += calls.broadcast_from(0, 64, "board");
            }
            // Then one field at a time, more shapes than a Context keeps records of.
            wrong += calls.allreduce_of(64, true, true, "board");    // in place
            wrong += calls.allreduce_of(64, false, false, "board");  // int32
            wrong += calls.allreduce_of(65, false, true, "board");   // one more element
            for (int root = 0; root < size; ++root) wrong += calls.broadcast_from(root, 64, "board");
            wrong += calls.reduce_to(round % size, 64, ReduceOp::sum);
            wrong += calls.reduce_to(round % size, 64, ReduceOp::max);  // only the operator differs
            wrong += calls.reduce_to((round + 1) % size, 64, ReduceOp::max);  // only the root differs
            barrier(context);
          }
        },
        std::chrono::milliseconds(30000),
        [&](int, ConnectOptions& options) { options.trace = (directory / "trace-{rank}.json").string(); }));
    CHECK(wrong == 0);
    const std::map<std::string, int> counts = algorithms_traced(directory);
    // Per round and rank: ring 2; board: 2 + 3 allreduces, 2 + size broadcasts.
    CHECK(counts.at("allreduce/ring") == size * kRounds * 2);
    CHECK(counts.at("allreduce/board") == size * kRounds * 5);
    CHECK(counts.at("broadcast/board") == size * kRounds * (2 + size));
  }
}

TEST_CASE("a blocking call of a recorded shape after async calls runs after them, bit-exact", "[repeated]") {
  std::atomic<int> wrong{0};
  require_all_ok(run_ranks(3, [&](Context& context) {
    const int rank = context.rank();
    for (int round = 0; round < 30; ++round) {
      Round calls(context, round);
      wrong += calls.allreduce_of(32, false, true, "auto");  // recorded (from the second round on, repeated)
      // Async calls of the same shape: the blocking one below waits for them.
      std::vector<std::vector<float>> queued(4, std::vector<float>(32));
      std::vector<Work> works;
      for (size_t k = 0; k < queued.size(); ++k) {
        for (size_t i = 0; i < 32; ++i) queued[k][i] = static_cast<float>(value_of(rank, i + k, round));
        works.push_back(allreduce_async(context, queued[k].data(), queued[k].data(), 32, DataType::float32,
                                        ReduceOp::sum, {}));
      }
      wrong += calls.allreduce_of(32, false, true, "auto");
      for (Work& work : works) work.wait();
      for (size_t k = 0; k < queued.size(); ++k)
        for (size_t i = 0; i < 32; ++i)
          if (queued[k][i] != static_cast<float>(6 * static_cast<int32_t>((i + k + round) % 7 + 1))) ++wrong;
    }
  }));
  CHECK(wrong == 0);
}

// The block collectives of fixed counts repeat by shape too (since stop
// 73): a record of an allgather out of place must not stand in for one in
// place, nor a gather to one root for a gather to another.
TEST_CASE("block collectives of fixed counts that repeat a shape but one field run as themselves, bit-exact",
          "[repeated]") {
  constexpr size_t kBlock = 24;
  for (int size : {2, 3}) {
    CAPTURE(size);
    std::atomic<int> wrong{0};
    require_all_ok(run_ranks(size, [&](Context& context) {
      const int rank = context.rank();
      const size_t members = static_cast<size_t>(size);
      // Element i of member m's block from member r in round k.
      const auto value = [](int from, size_t to_block, size_t i, int round) {
        return static_cast<int32_t>((from + 1) * 100 + static_cast<int32_t>(to_block) * 10 +
                                    static_cast<int32_t>((i + static_cast<size_t>(round)) % 7));
      };
      for (int round = 0; round < 20; ++round) {
        for (int twice = 0; twice < 2; ++twice) {
          for (bool in_place : {false, true}) {
            // allgather: every member's block (to_block 0).
            std::vector<int32_t> own(kBlock), all(kBlock * members, -1);
            for (size_t i = 0; i < kBlock; ++i) own[i] = value(rank, 0, i, round);
            if (in_place) {
              std::copy(own.begin(), own.end(), all.begin() + static_cast<std::ptrdiff_t>(kBlock * rank));
              allgather(context, all.data() + kBlock * static_cast<size_t>(rank), all.data(), kBlock,
                        DataType::int32);
            } else {
              allgather(context, own.data(), all.data(), kBlock, DataType::int32);
            }
            for (size_t m = 0; m < members; ++m)
              for (size_t i = 0; i < kBlock; ++i)
                if (all[m * kBlock + i] != value(static_cast<int>(m), 0, i, round)) ++wrong;
            // reduce_scatter (sum): block b of member r is value(r, b, i).
            std::vector<int32_t> input(kBlock * members), output(kBlock, -1);
            for (size_t b = 0; b < members; ++b)
              for (size_t i = 0; i < kBlock; ++i) input[b * kBlock + i] = value(rank, b, i, round);
            int32_t* result = in_place ? input.data() + kBlock * static_cast<size_t>(rank) : output.data();
            reduce_scatter(context, input.data(), result, kBlock, DataType::int32, ReduceOp::sum);
            for (size_t i = 0; i < kBlock; ++i) {
              int32_t expected = 0;
              for (int m = 0; m < size; ++m) expected += value(m, static_cast<size_t>(rank), i, round);
              if (result[i] != expected) ++wrong;
            }
          }
          // alltoall: member r's block b goes to member b.
          std::vector<int32_t> send(kBlock * members), received(kBlock * members, -1);
          for (size_t b = 0; b < members; ++b)
            for (size_t i = 0; i < kBlock; ++i) send[b * kBlock + i] = value(rank, b, i, round);
          alltoall(context, send.data(), received.data(), kBlock, DataType::int32);
          for (size_t m = 0; m < members; ++m)
            for (size_t i = 0; i < kBlock; ++i)
              if (received[m * kBlock + i] != value(static_cast<int>(m), static_cast<size_t>(rank), i, round))
                ++wrong;
          // gather and scatter to every root in turn: only the root differs.
          for (int root = 0; root < size; ++root) {
            std::vector<int32_t> block(kBlock), whole(kBlock * members, -1);
            for (size_t i = 0; i < kBlock; ++i) block[i] = value(rank, static_cast<size_t>(root), i, round);
            gather(context, block.data(), whole.data(), kBlock, DataType::int32, root);
            if (rank == root)
              for (size_t m = 0; m < members; ++m)
                for (size_t i = 0; i < kBlock; ++i)
                  if (whole[m * kBlock + i] != value(static_cast<int>(m), static_cast<size_t>(root), i, round))
                    ++wrong;
            std::vector<int32_t> piece(kBlock, -1);
            if (rank == root)
              for (size_t b = 0; b < members; ++b)
                for (size_t i = 0; i < kBlock; ++i) whole[b * kBlock + i] = value(root, b, i, round);
            scatter(context, whole.data(), piece.data(), kBlock, DataType::int32, root);
            for (size_t i = 0; i < kBlock; ++i)
              if (piece[i] != value(root, static_cast<size_t>(rank), i, round)) ++wrong;
          }
        }
      }
    }));
    CHECK(wrong == 0);
  }
}
