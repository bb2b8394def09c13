// Ring and recursive-halving reduce-scatter (and their v variants) in the
// simulator: bit-exact blocks for every op on 1..33 ranks, awkward and random
// per-rank counts including zeros; bytes each rank sends equal to each
// algorithm's formula; bounded scratch; out of place only.
#include <catch2/catch.hpp>

#include <memory>
#include <random>

#include "algorithms/model/power_of_two_fold.h"
#include "algorithms/plans/reduce_scatter/recursive_halving_reduce_scatter.h"
#include "algorithms/model/reduction_segments.h"
#include "algorithms/selection/registry.h"
#include "algorithms/plans/reduce_scatter/ring_reduce_scatter.h"
#include "test/algorithms/reduction_checks.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

size_t all_blocks_bytes(const Call& call) { return call.total_count() * call.element_bytes(); }

// Every block but the rank's own passes through it once.
size_t ring_bytes(const Call& call, int rank) {
  return all_blocks_bytes(call) - call.block_count(rank) * call.element_bytes();
}

// A folded-out rank hands over its whole input; a survivor gives away every
// block outside its group once and its partner's block at the end, which
// again comes to everything but its own block.
size_t recursive_halving_bytes(const Call& call, int rank) {
  if (call.size == 1) return 0;
  if (PowerOfTwoFold(rank, call.size).folded_out()) return all_blocks_bytes(call);
  return ring_bytes(call, rank);
}

size_t reduce_scatter_scratch_bound(const Call& call, const PlanTuning& tuning, bool pieces) {
  const size_t slots = tuning.scratch_segments * tuning.segment_bytes;
  if (!pieces) return slots;
  return 2 * (piece_bytes_for(tuning, call.element_bytes()) + call.size * call.element_bytes()) + slots;
}

struct ReduceScatterCandidate {
  const char* name;
  Builder build;
  size_t (*bytes)(const Call&, int);
  bool pieces;
};
const ReduceScatterCandidate reduce_scatter_candidates[] = {
    {"ring", ring_reduce_scatter.build, ring_bytes, false},
    {"recursive_halving", recursive_halving_reduce_scatter.build, recursive_halving_bytes, true},
};

void check_reduce_scatter(const ReduceScatterCandidate& algorithm, const Call& call, const PlanTuning& tuning) {
  INFO(algorithm.name);
  ReductionRun run = run_and_check(algorithm.build, call, tuning);
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank << " of " << call.size);
    REQUIRE(run.report.ranks[rank].bytes_sent == algorithm.bytes(call, rank));
    REQUIRE(run.plans[rank].scratch_bytes <= reduce_scatter_scratch_bound(call, tuning, algorithm.pieces));
  }
}

Call reduce_scatter_call(int size, size_t count, DataType type, ReduceOp op) {
  return make_call(Collective::reduce_scatter, 0, size, count, type, op, 0, false);
}

}  // namespace

TEST_CASE("reduce_scatter int32: every op, 1..33 ranks, awkward block counts", "[exhaustive]") {
  for (const ReduceScatterCandidate& algorithm : reduce_scatter_candidates)
    for (int size : reduction_rank_counts())
      for (size_t count : reduction_counts(size))
        for (ReduceOp op : reduction_ops_all()) {
          const Call call = reduce_scatter_call(size, count, DataType::int32, op);
          check_reduce_scatter(algorithm, call, default_tuning);
          // Many segments per block, without making 33-rank runs slow.
          if (op == ReduceOp::sum && count > 0)
            check_reduce_scatter(algorithm, call, count > 1000 ? PlanTuning{1024, 3} : tiny_segments);
        }
}

TEST_CASE("reduce_scatter float32 arithmetic ops, and float16, bfloat16, int8, float64", "[exhaustive]") {
  for (const ReduceScatterCandidate& algorithm : reduce_scatter_candidates) {
    for (int size : reduction_rank_counts())
      for (size_t count : reduction_counts(size))
        for (ReduceOp op : reduction_ops_arithmetic())
          check_reduce_scatter(algorithm, reduce_scatter_call(size, count, DataType::float32, op), default_tuning);
    for (int size : {1, 2, 3, 5, 6, 8, 11})
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}})
        for (DataType type : {DataType::float16, DataType::bfloat16, DataType::int8, DataType::float64})
          for (ReduceOp op : reduction_ops_arithmetic())
            check_reduce_scatter(algorithm, reduce_scatter_call(size, count, type, op), tiny_segments);
  }
}

TEST_CASE("reduce_scatter_v: random per-rank counts with zeros on 1..33 ranks", "[exhaustive]") {
  std::mt19937 random(1234);
  for (const ReduceScatterCandidate& algorithm : reduce_scatter_candidates)
    for (int size : reduction_rank_counts())
      for (size_t largest : {size_t{3}, size_t{300}})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg, ReduceOp::bxor}) {
          Call call = reduce_scatter_call(size, 0, DataType::int32, op);
          std::uniform_int_distribution<size_t> draw(0, largest);
          for (int rank = 0; rank < size; ++rank) call.counts.push_back(rank % 3 == 1 ? 0 : draw(random));
          check_reduce_scatter(algorithm, call, tiny_segments);
          check_reduce_scatter(algorithm, call, default_tuning);
        }
}

TEST_CASE("reduce_scatter of 100003 elements per rank runs in pieces and segments") {
  for (const ReduceScatterCandidate& algorithm : reduce_scatter_candidates)
    for (int size : {2, 3, 6, 8})
      check_reduce_scatter(algorithm, reduce_scatter_call(size, 100003, DataType::int32, ReduceOp::sum),
                           PlanTuning{4096, 4});
}

TEST_CASE("recursive-halving reduce_scatter sends one message per round for blocks smaller than a segment") {
  for (int size : {64, 1024})
    for (int rank : {0, size - 1}) {
      Call call = reduce_scatter_call(size, 16, DataType::float32, ReduceOp::sum);
      call.rank = rank;
      const Plan plan = recursive_halving_reduce_scatter.build(call, default_tuning);
      size_t sends = 0;
      for (const Step& step : plan.steps())
        if (step.kind == StepKind::send) ++sends;
      INFO(size << " ranks, rank " << rank);
      REQUIRE(sends == static_cast<size_t>(log2_of_power(size)));
    }
}

TEST_CASE("reduce_scatter scratch stays bounded for 3 GiB of blocks") {
  const size_t count = (size_t{3} << 30) / 4 / 6;
  for (const ReduceScatterCandidate& algorithm : reduce_scatter_candidates)
    for (int rank : {0, 1, 5}) {
      Call call = reduce_scatter_call(6, count, DataType::float32, ReduceOp::sum);
      call.rank = rank;
      const Plan plan = algorithm.build(call, default_tuning);
      REQUIRE(plan.scratch_bytes <= reduce_scatter_scratch_bound(call, default_tuning, algorithm.pieces));
    }
}

TEST_CASE("reduce_scatter algorithms refuse in place and counts of the wrong length") {
  for (const Algorithm& algorithm : all_algorithms()) {
    if (algorithm.collective != Collective::reduce_scatter) continue;
    INFO(algorithm.name);
    Call call = reduce_scatter_call(4, 10, DataType::float32, ReduceOp::sum);
    call.topology = std::make_shared<const Topology>(Topology::blocks({2, 2}));  // for the two-level one
    REQUIRE(algorithm.supports(call));
    call.in_place = true;
    REQUIRE_FALSE(algorithm.supports(call));
    call.in_place = false;
    call.counts = {1, 2, 3};
    REQUIRE_FALSE(algorithm.supports(call));
  }
  REQUIRE(find_algorithm(Collective::reduce_scatter, "ring") != nullptr);
  REQUIRE(find_algorithm(Collective::reduce_scatter, "recursive_halving") != nullptr);
}

TEST_CASE("reduce_scatter costs: recursive halving wins small blocks, the ring large ones on many ranks") {
  CostModel model;
  model.alpha_seconds = 1e-5;
  model.beta_seconds_per_byte = 1e-9;
  model.gamma_seconds_per_byte = 0;
  Call call = reduce_scatter_call(8, 250, DataType::float32, ReduceOp::sum);  // 8000 bytes in all
  REQUIRE(ring_reduce_scatter.cost_seconds(call, model) == Approx(7e-5 + 7000e-9));
  REQUIRE(recursive_halving_reduce_scatter.cost_seconds(call, model) == Approx(3e-5 + 7000e-9));
  call.size = 1;
  REQUIRE(ring_reduce_scatter.cost_seconds(call, model) == 0.0);
  REQUIRE(recursive_halving_reduce_scatter.cost_seconds(call, model) == 0.0);
}
