// Allgather and allgatherv algorithms checked in the simulator: every rank
// count 1..33, awkward and random (zero-including) counts, in and out of
// place, bit-exact; bytes and messages each rank sends against each
// algorithm's formula; scratch bounded.
#include <catch2/catch.hpp>

#include <random>

#include "algorithms/model/block_layout.h"
#include "algorithms/selection/registry.h"
#include "algorithms/selection/selection.h"
#include "base/error.h"
#include "test/algorithms/movement_check.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

bool is_power_of_two(int value) { return (value & (value - 1)) == 0; }

// Bytes of blocks [first, first + blocks) taken cyclically from `first`.
size_t cyclic_bytes(const std::vector<size_t>& bytes, int first, int blocks) {
  size_t total = 0;
  for (int i = 0; i < blocks; ++i) total += bytes[wrap_rank(first + i, static_cast<int>(bytes.size()))];
  return total;
}

// What rank r sends, by the algorithm's own description (header comments).
ExpectedSends expected_sends(std::string_view name, const Call& call, int rank, const PlanTuning& tuning) {
  const std::vector<size_t> bytes = block_bytes(call);
  const int size = call.size;
  ExpectedSends expected;
  if (size == 1) return expected;
  if (name == "ring") {
    // Every block but the one of rank r+1, which is the last one received.
    const size_t segment = segment_bytes_of(tuning, call.element_bytes());
    for (int block = 0; block < size; ++block) {
      if (block == wrap_rank(rank + 1, size)) continue;
      expected.bytes += bytes[block];
      expected.messages += segment_count(bytes[block], segment);
    }
  } else if (name == "recursive_doubling") {
    for (int distance = 1; distance < size; distance *= 2) {
      const size_t group = cyclic_bytes(bytes, rank & ~(distance - 1), distance);
      expected.bytes += group;
      expected.messages += group > 0;
    }
  } else if (name == "bruck") {
    for (int distance = 1; distance < size; distance *= 2) {
      const size_t held = cyclic_bytes(bytes, rank, std::min(distance, size - distance));
      expected.bytes += held;
      expected.messages += held > 0;
    }
  }
  return expected;
}

void check_allgather(const Algorithm& algorithm, const Call& call, const PlanTuning& tuning) {
  MovementRun run = run_and_check(algorithm, call, tuning);
  INFO(describe(call, algorithm));
  const size_t total = call.total_count() * call.element_bytes();
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank);
    const ExpectedSends expected = expected_sends(algorithm.name, call, rank, tuning);
    REQUIRE(run.report.ranks[rank].bytes_sent == expected.bytes);
    REQUIRE(run.report.ranks[rank].messages_sent == expected.messages);
    // With equal blocks every allgather sends the optimal (P-1) blocks.
    if (call.counts.empty()) REQUIRE(expected.bytes == static_cast<size_t>(call.size - 1) * call.bytes());
    if (algorithm.name == "bruck")
      REQUIRE(run.plans[rank].scratch_bytes <= total);
    else
      REQUIRE(run.plans[rank].scratch_bytes == 0);
  }
}

// The flat ones: the two-level one needs a topology (test_hierarchical.cc).
std::vector<const Algorithm*> allgather_algorithms() {
  std::vector<const Algorithm*> found;
  for (const Algorithm& algorithm : all_algorithms())
    if (algorithm.collective == Collective::allgather && algorithm.name != "hierarchical") found.push_back(&algorithm);
  return found;
}

}  // namespace

TEST_CASE("allgather: every algorithm, rank counts 1..33, awkward counts, in and out of place", "[sweep]") {
  REQUIRE(allgather_algorithms().size() == 3);
  for (const Algorithm* algorithm : allgather_algorithms())
    for (int size = 1; size <= 33; ++size) {
      Call probe = make_call(Collective::allgather, 0, size, 1, DataType::int32, ReduceOp::sum, 0, false);
      if (!algorithm->supports(probe)) {
        REQUIRE((algorithm->name == "recursive_doubling" && !is_power_of_two(size)));
        continue;
      }
      for (size_t count : awkward_counts(size))
        for (bool in_place : {false, true}) {
          Call call = make_call(Collective::allgather, 0, size, count, DataType::int32, ReduceOp::sum, 0, in_place);
          check_allgather(*algorithm, call, tiny_movement_segments);
          if (count == 1009 && size % 4 == 1) check_allgather(*algorithm, call, PlanTuning{});
        }
    }
}

TEST_CASE("allgather of other types: float16, int8, float64") {
  for (const Algorithm* algorithm : allgather_algorithms())
    for (int size : {2, 4, 5, 8})
      for (DataType type : {DataType::float16, DataType::int8, DataType::float64, DataType::bfloat16}) {
        Call call = make_call(Collective::allgather, 0, size, 77, type, ReduceOp::sum, 0, false);
        if (algorithm->supports(call)) check_allgather(*algorithm, call, tiny_movement_segments);
      }
}

TEST_CASE("allgatherv: random counts with zeros, every algorithm, in and out of place") {
  std::mt19937 random(20261122);
  for (const Algorithm* algorithm : allgather_algorithms())
    for (int size = 1; size <= 33; ++size)
      for (int trial = 0; trial < 3; ++trial) {
        Call call = make_call(Collective::allgather, 0, size, 0, DataType::int32, ReduceOp::sum, 0, trial == 1);
        call.counts = random_counts(random, size, trial == 2 ? 300 : 5);
        if (trial == 0 && size > 2) call.counts.assign(static_cast<size_t>(size), 0), call.counts[size / 2] = 3;
        if (!algorithm->supports(call)) continue;
        check_allgather(*algorithm, call, tiny_movement_segments);
      }
}

TEST_CASE("allgather selection: recursive doubling is refused on 6 ranks, listing the names") {
  Call call = make_call(Collective::allgather, 0, 6, 10, DataType::float32, ReduceOp::sum, 0, false);
  REQUIRE_THROWS_AS(select_algorithm(call, "recursive_doubling", CostModel{}, {}), InvalidArgument);
  REQUIRE_THROWS_WITH(select_algorithm(call, "recursive_doubling", CostModel{}, {}),
                      Catch::Contains("ring") && Catch::Contains("bruck") && Catch::Contains("recursive_doubling"));
  REQUIRE_THROWS_AS(find_algorithm(Collective::allgather, "recursive_doubling")->build(call, PlanTuning{}),
                    InvalidArgument);
  // Auto never picks what cannot run, and prefers few rounds for small blocks.
  REQUIRE(select_algorithm(call, "auto", CostModel{}, {}).name == "bruck");
  call.count = 100 << 20;
  REQUIRE(select_algorithm(call, "auto", CostModel{}, {}).name == "ring");
  call.size = 8;
  call.count = 10;
  REQUIRE(select_algorithm(call, "auto", CostModel{}, {}).name == "recursive_doubling");
}

TEST_CASE("allgather cost formulas") {
  CostModel model;
  model.alpha_seconds = 1e-5;
  model.beta_seconds_per_byte = 1e-9;
  model.gamma_seconds_per_byte = 0;
  Call call = make_call(Collective::allgather, 0, 4, 1000, DataType::float32, ReduceOp::sum, 0, false);
  // n = 16000 bytes of result; each rank sends 3/4 of it.
  REQUIRE(find_algorithm(Collective::allgather, "ring")->cost_seconds(call, model) == Approx(3e-5 + 12000e-9));
  REQUIRE(find_algorithm(Collective::allgather, "recursive_doubling")->cost_seconds(call, model) ==
          Approx(2e-5 + 12000e-9));
  REQUIRE(find_algorithm(Collective::allgather, "bruck")->cost_seconds(call, model) == Approx(2e-5 + 12000e-9));
  call.size = 1;
  for (const Algorithm* algorithm : allgather_algorithms()) REQUIRE(algorithm->cost_seconds(call, model) == 0.0);
}

TEST_CASE("CHORUS_ALGO-style overrides name the data-movement algorithms") {
  auto overrides = parse_algorithm_overrides(
      "allgather:bruck, gather:linear, scatter:binomial, alltoall:pairwise, broadcast:chain");
  REQUIRE(overrides.size() == 5);
  Call call = make_call(Collective::allgather, 0, 8, 10, DataType::float32, ReduceOp::sum, 0, false);
  REQUIRE(select_algorithm(call, "auto", CostModel{}, overrides).name == "bruck");
  REQUIRE_THROWS_WITH(parse_algorithm_overrides("allgather:tree"),
                      Catch::Contains("ring, recursive_doubling, bruck"));
}
