// The public API end to end, ranks as threads over real loopback TCP.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <string>

#include "base/half.h"
#include "base/log.h"
#include "test/integration/rank_threads.h"

using namespace chorus;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;

namespace {

// Small integers: exact in every type and in any reduction order.
int64_t input_of(ReduceOp op, int rank, int size, size_t i) {
  switch (op) {
    case ReduceOp::sum: return static_cast<int64_t>(i % 7) + rank;
    case ReduceOp::prod: return rank < 2 && i % 3 == 0 ? 2 : 1;
    case ReduceOp::avg: return static_cast<int64_t>(i % 9) + (rank == size - 1 ? size : 0);
    default: return static_cast<int64_t>((i * 13 + static_cast<size_t>(rank) * 29) % 100);
  }
}

int64_t expected_of(ReduceOp op, int size, size_t i) {
  int64_t value = input_of(op, 0, size, i);
  for (int rank = 1; rank < size; ++rank) {
    int64_t next = input_of(op, rank, size, i);
    switch (op) {
      case ReduceOp::sum: case ReduceOp::avg: value += next; break;
      case ReduceOp::prod: value *= next; break;
      case ReduceOp::min: value = std::min(value, next); break;
      case ReduceOp::max: value = std::max(value, next); break;
      case ReduceOp::band: value &= next; break;
      case ReduceOp::bor: value |= next; break;
      case ReduceOp::bxor: value ^= next; break;
    }
  }
  return op == ReduceOp::avg ? value / size : value;
}

template <class T>
T make(int64_t value) {
  if constexpr (std::is_same_v<T, float16_t>) return to_float16(static_cast<float>(value));
  else if constexpr (std::is_same_v<T, bfloat16_t>) return to_bfloat16(static_cast<float>(value));
  else return static_cast<T>(value);
}

template <class T>
bool same_bits(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

// One rank's allreduce of `count` elements, checked bit-exactly; what is
// wrong is thrown naming the rank and the call (run_ranks' bodies may not
// CAPTURE).
template <class T>
void allreduce_and_check(Context& context, size_t count, ReduceOp op, bool in_place) {
  const int size = context.size();
  std::vector<T> input(count), output(count);
  for (size_t i = 0; i < count; ++i) input[i] = make<T>(input_of(op, context.rank(), size, i));
  if (in_place) {
    allreduce(context, std::span<T>(input), op);
    output = input;
  } else {
    allreduce(context, std::span<const T>(input), std::span<T>(output), op);
  }
  for (size_t i = 0; i < count; ++i) {
    if (!same_bits(output[i], make<T>(expected_of(op, size, i))))
      throw std::runtime_error(cat("rank ", context.rank(), " of ", size, ": allreduce of ", count, " ",
                                   to_string(data_type_of<T>()), " with ", to_string(op),
                                   in_place ? " in place" : "", ": element ", i, " is wrong"));
  }
}

template <class T>
void check_allreduce(int size, size_t count, ReduceOp op, bool in_place) {
  CAPTURE(size, count, to_string(data_type_of<T>()), to_string(op), in_place);
  require_all_ok(run_ranks(size, [&](Context& context) { allreduce_and_check<T>(context, count, op, in_place); }));
}

}  // namespace

// One job per rank count runs every count, type and operator: connecting a
// job (its links measured, the board's costs) took 90% of this test when
// each call had a job of its own (311 jobs, 36 s; 137 s under ASan), and a
// job in real use serves many calls of changing shapes.
TEST_CASE("allreduce is bit-exact for every type and op, 1 to 8 ranks", "[allreduce]") {
  for (int size : {1, 2, 3, 4, 5, 7, 8}) {
    CAPTURE(size);
    require_all_ok(run_ranks(size, [&](Context& context) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{4099}}) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
          allreduce_and_check<float>(context, count, op, count % 2 == 0);
        }
      }
      if (size < 2 || size > 4) return;
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
        allreduce_and_check<int8_t>(context, 1001, op, true);
        allreduce_and_check<uint8_t>(context, 1001, op, false);
        allreduce_and_check<int32_t>(context, 1001, op, true);
        allreduce_and_check<uint32_t>(context, 1001, op, false);
        allreduce_and_check<int64_t>(context, 1001, op, true);
        allreduce_and_check<uint64_t>(context, 1001, op, false);
        allreduce_and_check<float16_t>(context, 1001, op, true);
        allreduce_and_check<bfloat16_t>(context, 1001, op, false);
        allreduce_and_check<double>(context, 1001, op, true);
      }
      for (ReduceOp op : {ReduceOp::band, ReduceOp::bor, ReduceOp::bxor}) {
        allreduce_and_check<int8_t>(context, 1001, op, true);
        allreduce_and_check<uint32_t>(context, 1001, op, false);
        allreduce_and_check<int64_t>(context, 1001, op, true);
        allreduce_and_check<uint64_t>(context, 1001, op, false);
      }
    }));
  }
}

TEST_CASE("allreduce of more than 64 MiB", "[allreduce][large]") {
  check_allreduce<float>(3, (64u << 20) / 4 + 12345, ReduceOp::sum, true);
}

// One job per rank count, as above.
TEST_CASE("broadcast from every root", "[broadcast]") {
  for (int size : {1, 2, 3, 5, 8}) {
    CAPTURE(size);
    require_all_ok(run_ranks(size, [&](Context& context) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1000003}}) {
        for (int root = 0; root < size; ++root) {
          std::vector<int32_t> data(count, -1);
          if (context.rank() == root) std::iota(data.begin(), data.end(), root * 1000);
          broadcast(context, std::span<int32_t>(data), root);
          for (size_t i = 0; i < count; ++i) {
            if (data[i] != static_cast<int32_t>(root * 1000 + i))
              throw std::runtime_error(cat("rank ", context.rank(), " of ", size, ": broadcast of ", count,
                                           " int32 from root ", root, ": element ", i, " wrong"));
          }
        }
      }
    }));
  }
}

TEST_CASE("barrier, and async collectives complete in issue order", "[barrier][async]") {
  auto outcomes = run_ranks(4, [](Context& context) {
    barrier(context);
    std::vector<std::vector<float>> buffers(6, std::vector<float>(100000));
    std::vector<Work> works;
    for (size_t b = 0; b < buffers.size(); ++b) {
      std::fill(buffers[b].begin(), buffers[b].end(), static_cast<float>(b + 1));
      works.push_back(allreduce_async(context, std::span<float>(buffers[b]), ReduceOp::sum));
    }
    works.push_back(barrier_async(context));
    // A blocking call after async ones runs after them.
    std::vector<float> last(10, 1.0f);
    allreduce(context, std::span<float>(last), ReduceOp::sum);
    for (auto& work : works) work.wait();
    for (size_t b = 0; b < buffers.size(); ++b) {
      for (float value : buffers[b]) {
        if (value != static_cast<float>((b + 1) * 4)) throw std::runtime_error("async result wrong");
      }
    }
    if (last[0] != 4.0f) throw std::runtime_error("blocking result after async wrong");
  });
  require_all_ok(outcomes);
}

TEST_CASE("bad arguments are InvalidArgument on the calling rank and stop the others", "[errors]") {
  // Rank 1 rejects its own call; ranks 0 and 2 are waiting for its data and
  // must learn why at once, not at their timeout.
  auto start = std::chrono::steady_clock::now();
  auto outcomes = run_ranks(3, [](Context& context) {
    std::vector<float> data(1000, 1.0f);
    ReduceOp op = context.rank() == 1 ? ReduceOp::bxor : ReduceOp::sum;  // bxor on floats is meaningless
    allreduce(context, std::span<float>(data), op);
  }, std::chrono::milliseconds(20000));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  REQUIRE_THROWS_AS(std::rethrow_exception(outcomes[1].error), InvalidArgument);
  for (int rank : {0, 2}) {
    REQUIRE(outcomes[static_cast<size_t>(rank)].error);
    try {
      std::rethrow_exception(outcomes[static_cast<size_t>(rank)].error);
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find("rank 1") != std::string::npos);
    }
  }
}

TEST_CASE("bitwise ops on floats are rejected", "[errors]") {
  auto outcomes = run_ranks(1, [](Context& context) {
    std::vector<float> data(4);
    allreduce(context, std::span<float>(data), ReduceOp::bxor);
  });
  REQUIRE_THROWS_AS(std::rethrow_exception(outcomes[0].error), InvalidArgument);
}

TEST_CASE("counts that differ across ranks give MismatchError on every rank", "[errors]") {
  auto outcomes = run_ranks(3, [](Context& context) {
    std::vector<float> data(context.rank() == 2 ? 1001 : 1000, 1.0f);
    allreduce(context, std::span<float>(data), ReduceOp::sum);
  }, std::chrono::milliseconds(10000));
  for (const auto& outcome : outcomes) {
    REQUIRE(outcome.error);
    try {
      std::rethrow_exception(outcome.error);
    } catch (const MismatchError&) {
    } catch (const Error& error) {
      FAIL("expected MismatchError, got: " << error.what());
    }
  }
}

TEST_CASE("abort unblocks a rank waiting for a peer that never comes", "[errors]") {
  auto outcomes = run_ranks(2, [](Context& context) {
    if (context.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      context.abort("test abort");
      return;
    }
    std::vector<float> data(10);
    auto start = std::chrono::steady_clock::now();
    try {
      allreduce(context, std::span<float>(data), ReduceOp::sum);
    } catch (const Error&) {
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(5)) throw std::runtime_error("too slow");
      return;
    }
    throw std::runtime_error("allreduce succeeded against an aborted peer");
  });
  require_all_ok(outcomes);
}

TEST_CASE("a 3 GiB buffer works", "[large][huge]") {
  const size_t count = (size_t{3} << 30) + 7;  // bytes of uint8, past 2^31 and 2^32 - 1 is not needed
  auto outcomes = run_ranks(2, [&](Context& context) {
    std::vector<uint8_t> data(count);
    for (size_t i = 0; i < count; i += 4096) data[i] = static_cast<uint8_t>(i / 4096 + context.rank());
    data[count - 1] = static_cast<uint8_t>(context.rank() + 1);
    allreduce(context, std::span<uint8_t>(data), ReduceOp::sum);
    for (size_t i = 0; i < count; i += 4096) {
      if (data[i] != static_cast<uint8_t>(2 * (i / 4096) + 1)) throw std::runtime_error(cat("wrong at ", i));
    }
    if (data[count - 1] != 3) throw std::runtime_error("last element wrong");
  }, std::chrono::milliseconds(120000));
  require_all_ok(outcomes);
}
