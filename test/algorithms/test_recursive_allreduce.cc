// Recursive doubling and halving-doubling allreduce in the simulator: bit-exact
// results for every op on 1..33 ranks and awkward counts, in and out of
// place; bytes each rank sends equal to each algorithm's formula; bounded
// scratch.
#include <catch2/catch.hpp>

#include "algorithms/plans/allreduce/halving_doubling_allreduce.h"
#include "algorithms/model/power_of_two_fold.h"
#include "algorithms/model/recursive_phases.h"
#include "algorithms/plans/allreduce/recursive_doubling_allreduce.h"
#include "test/algorithms/reduction_checks.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

// Folded-out ranks send their buffer once; survivors send it once per
// doubling round, plus once more to a folded-out partner.
size_t recursive_doubling_bytes(const Call& call, int rank) {
  if (call.size == 1) return 0;
  const PowerOfTwoFold fold(rank, call.size);
  if (fold.folded_out()) return call.bytes();
  return call.bytes() * (log2_of_power(fold.power()) + (fold.takes_partner() ? 1 : 0));
}

// Halving gives away every group but the rank's own once; doubling round d
// sends the d groups held (the aligned run containing the rank's group).
size_t halving_doubling_bytes(const Call& call, int rank) {
  if (call.size == 1) return 0;
  const PowerOfTwoFold fold(rank, call.size);
  if (fold.folded_out()) return call.bytes();
  const int power = fold.power(), me = fold.new_rank();
  auto group_bytes = [&](int group) {
    return halving_group_elements(call.count, power, group) * call.element_bytes();
  };
  size_t sent = call.bytes() - group_bytes(me);
  for (int distance = 1; distance < power; distance *= 2)
    for (int group = me & ~(distance - 1); group < (me & ~(distance - 1)) + distance; ++group) sent += group_bytes(group);
  if (fold.takes_partner()) sent += call.bytes();
  return sent;
}

void check(Builder build, size_t (*expected_bytes)(const Call&, int), const Call& call, const PlanTuning& tuning) {
  ReductionRun run = run_and_check(build, call, tuning);
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank << " of " << call.size << ", count " << call.count);
    REQUIRE(run.report.ranks[rank].bytes_sent == expected_bytes(call, rank));
    REQUIRE(run.plans[rank].scratch_bytes <= tuning.scratch_segments * tuning.segment_bytes);
  }
}

struct RecursiveAllreduce {
  const char* name;
  Builder build;
  size_t (*bytes)(const Call&, int);
};
const RecursiveAllreduce candidates[] = {
    {"recursive_doubling", recursive_doubling_allreduce.build, recursive_doubling_bytes},
    {"halving_doubling", halving_doubling_allreduce.build, halving_doubling_bytes},
};

}  // namespace

TEST_CASE("recursive allreduces, int32: every op, 1..33 ranks, awkward counts, in and out of place", "[exhaustive]") {
  for (const RecursiveAllreduce& algorithm : candidates) {
    INFO(algorithm.name);
    for (int size : reduction_rank_counts())
      for (size_t count : reduction_counts(size))
        for (ReduceOp op : reduction_ops_all())
          for (bool in_place : {true, false}) {
            const Call call = make_call(Collective::allreduce, 0, size, count, DataType::int32, op, 0, in_place);
            check(algorithm.build, algorithm.bytes, call, default_tuning);
            if (count == 1009 && op == ReduceOp::bxor) check(algorithm.build, algorithm.bytes, call, tiny_segments);
          }
  }
}

TEST_CASE("recursive allreduces, float32: arithmetic ops, 1..33 ranks, in and out of place, small segments", "[exhaustive]") {
  for (const RecursiveAllreduce& algorithm : candidates) {
    INFO(algorithm.name);
    for (int size : reduction_rank_counts())
      for (size_t count : reduction_counts(size))
        for (ReduceOp op : reduction_ops_arithmetic())
          for (bool in_place : {true, false})
            check(algorithm.build, algorithm.bytes,
                  make_call(Collective::allreduce, 0, size, count, DataType::float32, op, 0, in_place),
                  op == ReduceOp::sum ? tiny_segments : default_tuning);
  }
}

TEST_CASE("recursive allreduces: float16, bfloat16, int8 and float64") {
  for (const RecursiveAllreduce& algorithm : candidates) {
    INFO(algorithm.name);
    for (int size : {1, 2, 3, 5, 6, 8, 11})
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}})
        for (DataType type : {DataType::float16, DataType::bfloat16, DataType::int8, DataType::float64})
          for (ReduceOp op : reduction_ops_arithmetic())
            for (bool in_place : {true, false})
              check(algorithm.build, algorithm.bytes,
                    make_call(Collective::allreduce, 0, size, count, type, op, 0, in_place), tiny_segments);
  }
}

TEST_CASE("recursive allreduces pipeline 100003 elements in segments") {
  for (const RecursiveAllreduce& algorithm : candidates)
    for (int size : {2, 5, 8, 12})
      for (bool in_place : {true, false})
        check(algorithm.build, algorithm.bytes,
              make_call(Collective::allreduce, 0, size, 100003, DataType::int32, ReduceOp::sum, 0, in_place),
              PlanTuning{4096, 4});
}

TEST_CASE("halving-doubling sends the bandwidth-optimal amount on powers of two") {
  for (int size : {2, 4, 8, 16, 32})
    for (int rank : {0, size - 1}) {
      const Call call =
          make_call(Collective::allreduce, rank, size, 1 << 20, DataType::float32, ReduceOp::sum, 0, true);
      const Plan plan = halving_doubling_allreduce.build(call, default_tuning);
      size_t sent = 0;
      for (const Step& step : plan.steps())
        if (step.kind == StepKind::send) sent += step.from.length;
      REQUIRE(sent == call.bytes() / static_cast<size_t>(size) * 2 * static_cast<size_t>(size - 1));
    }
}

TEST_CASE("halving-doubling sends one message per round when its groups are smaller than a segment") {
  // 64 KiB over up to 1,024 ranks: 64-byte groups, which went one message each.
  for (int size : {64, 1000, 1024})
    for (int rank : {0, 1, size - 1}) {
      const Call call =
          make_call(Collective::allreduce, rank, size, 16384, DataType::float32, ReduceOp::sum, 0, false);
      const PowerOfTwoFold fold(rank, size);
      size_t expected = fold.folded_out() ? 1 : 2 * static_cast<size_t>(log2_of_power(fold.power()));
      if (fold.takes_partner()) ++expected;
      const Plan plan = halving_doubling_allreduce.build(call, default_tuning);
      size_t sends = 0;
      for (const Step& step : plan.steps())
        if (step.kind == StepKind::send) ++sends;
      INFO(size << " ranks, rank " << rank);
      REQUIRE(sends == expected);
    }
}

TEST_CASE("recursive allreduces keep scratch bounded for a 3 GiB buffer") {
  const size_t count = (size_t{3} << 30) / 4;
  for (const RecursiveAllreduce& algorithm : candidates)
    for (int rank : {0, 3}) {
      const Call call = make_call(Collective::allreduce, rank, 6, count, DataType::float32, ReduceOp::sum, 0, true);
      const Plan plan = algorithm.build(call, default_tuning);
      REQUIRE(plan.scratch_bytes <= default_tuning.scratch_segments * default_tuning.segment_bytes);
    }
}

TEST_CASE("recursive allreduce costs follow their formulas") {
  CostModel model;
  model.alpha_seconds = 1e-5;
  model.beta_seconds_per_byte = 1e-9;
  model.gamma_seconds_per_byte = 1e-10;
  Call call = make_call(Collective::allreduce, 0, 8, 1000, DataType::float32, ReduceOp::sum, 0, true);
  REQUIRE(recursive_doubling_allreduce.cost_seconds(call, model) == Approx(3 * (1e-5 + 4000 * 1.1e-9)));
  // Each halving round exposes the reduction of one piece (a group of
  // 4000 / 8 bytes here), the rest overlaps the wire: 3 x 500 bytes.
  REQUIRE(halving_doubling_allreduce.cost_seconds(call, model) == Approx(6e-5 + 1.75 * 4000e-9 + 1500e-10));
  call.size = 6;  // folds 2 ranks into 4
  REQUIRE(recursive_doubling_allreduce.cost_seconds(call, model) ==
          Approx(2 * (1e-5 + 4000 * 1.1e-9) + 2 * (1e-5 + 4000e-9) + 4000e-10));
  // 64 MiB on 4 ranks: pieces are segments (512 KiB), one per round exposed.
  Call large = make_call(Collective::allreduce, 0, 4, size_t{16} << 20, DataType::float32, ReduceOp::sum, 0, true);
  const double bytes = 64.0 * 1024 * 1024;
  REQUIRE(halving_doubling_allreduce.cost_seconds(large, model) ==
          Approx(4e-5 + 1.5 * bytes * 1e-9 + 2 * 512.0 * 1024 * 1e-10));
  call.size = 1;
  REQUIRE(halving_doubling_allreduce.cost_seconds(call, model) == 0.0);
  // Small messages favour recursive doubling, large ones halving-doubling.
  call.size = 8;
  call.count = 4;
  REQUIRE(recursive_doubling_allreduce.cost_seconds(call, model) <
          halving_doubling_allreduce.cost_seconds(call, model));
  call.count = 1 << 22;
  REQUIRE(halving_doubling_allreduce.cost_seconds(call, model) <
          recursive_doubling_allreduce.cost_seconds(call, model));
}
