// Binomial and reduce-scatter-gather reduce in the simulator: bit-exact results
// at every root on 1..33 ranks, awkward counts, in and out of place, non-root
// outputs untouched; bytes each rank sends equal to each algorithm's formula;
// bounded scratch.
#include <catch2/catch.hpp>

#include "algorithms/plans/reduce/binomial_reduce.h"
#include "algorithms/plans/allreduce/halving_doubling_allreduce.h"
#include "algorithms/model/power_of_two_fold.h"
#include "algorithms/model/recursive_phases.h"
#include "algorithms/plans/reduce/reduce_scatter_gather_reduce.h"
#include "algorithms/model/reduction_segments.h"
#include "test/algorithms/reduction_checks.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

size_t binomial_bytes(const Call& call, int rank, const PlanTuning&) { return rank == call.root ? 0 : call.bytes(); }

// Per piece: halving gives away everything but the rank's own group; the
// gather sends the groups a rank holds (the aligned run of lowbit(i) groups
// from i) to its parent. Folded-out ranks hand over their whole buffer.
size_t reduce_scatter_gather_bytes(const Call& call, int rank, const PlanTuning& tuning) {
  if (call.size == 1) return 0;
  const PowerOfTwoFold fold(rank, call.size, call.root);
  if (fold.folded_out()) return call.bytes();
  const int power = fold.power(), me = fold.new_rank();
  const size_t element = call.element_bytes();
  const size_t piece_elements = piece_bytes_for(tuning, element) / element;
  size_t sent = 0;
  for (size_t first = 0; first < call.count; first += piece_elements) {
    const size_t elements = std::min(piece_elements, call.count - first);
    sent += (elements - halving_group_elements(elements, power, me)) * element;
    for (int group = me; me != 0 && group < me + (me & -me); ++group)
      sent += halving_group_elements(elements, power, group) * element;
  }
  return sent;
}

size_t reduce_scratch_bound(const Call& call, const PlanTuning& tuning) {
  return 2 * piece_bytes_for(tuning, call.element_bytes()) + tuning.scratch_segments * tuning.segment_bytes;
}

struct ReduceCandidate {
  const char* name;
  Builder build;
  size_t (*bytes)(const Call&, int, const PlanTuning&);
};
const ReduceCandidate reduce_candidates[] = {
    {"binomial", binomial_reduce.build, binomial_bytes},
    {"reduce_scatter_gather", reduce_scatter_gather_reduce.build, reduce_scatter_gather_bytes},
};

void check_reduce(const ReduceCandidate& algorithm, const Call& call, const PlanTuning& tuning) {
  INFO(algorithm.name);
  ReductionRun run = run_and_check(algorithm.build, call, tuning);
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank << " of " << call.size << ", root " << call.root << ", count " << call.count);
    REQUIRE(run.report.ranks[rank].bytes_sent == algorithm.bytes(call, rank, tuning));
    REQUIRE(run.plans[rank].scratch_bytes <= reduce_scratch_bound(call, tuning));
  }
}

Call reduce_call(int size, size_t count, DataType type, ReduceOp op, int root, bool in_place) {
  return make_call(Collective::reduce, 0, size, count, type, op, root, in_place);
}

}  // namespace

TEST_CASE("reduce int32 at every root: 1..33 ranks, awkward counts, in and out of place", "[exhaustive]") {
  for (const ReduceCandidate& algorithm : reduce_candidates)
    for (int size : reduction_rank_counts())
      for (int root = 0; root < size; ++root)
        for (size_t count : reduction_counts(size))
          for (bool in_place : {true, false}) {
            const ReduceOp op = root % 2 == 0 ? ReduceOp::sum : ReduceOp::avg;
            check_reduce(algorithm, reduce_call(size, count, DataType::int32, op, root, in_place), default_tuning);
          }
}

TEST_CASE("reduce int32 with every op and float32 with arithmetic ops, 1..33 ranks", "[exhaustive]") {
  for (const ReduceCandidate& algorithm : reduce_candidates)
    for (int size : reduction_rank_counts())
      for (size_t count : reduction_counts(size))
        for (bool in_place : {true, false}) {
          const int root = (size * 2) / 3;
          for (ReduceOp op : reduction_ops_all())
            check_reduce(algorithm, reduce_call(size, count, DataType::int32, op, root, in_place), default_tuning);
          for (ReduceOp op : reduction_ops_arithmetic())
            check_reduce(algorithm, reduce_call(size, count, DataType::float32, op, size - 1, in_place),
                         count > 1000 ? PlanTuning{1024, 3} : tiny_segments);
        }
}

TEST_CASE("reduce float16, bfloat16, int8 and float64") {
  for (const ReduceCandidate& algorithm : reduce_candidates)
    for (int size : {1, 2, 3, 5, 6, 8, 11})
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}})
        for (DataType type : {DataType::float16, DataType::bfloat16, DataType::int8, DataType::float64})
          for (ReduceOp op : reduction_ops_arithmetic())
            for (bool in_place : {true, false})
              check_reduce(algorithm, reduce_call(size, count, type, op, size / 2, in_place), tiny_segments);
}

TEST_CASE("reduce of 100003 elements pipelines pieces and segments") {
  for (const ReduceCandidate& algorithm : reduce_candidates)
    for (int size : {2, 3, 7, 8})
      for (bool in_place : {true, false})
        check_reduce(algorithm, reduce_call(size, 100003, DataType::int32, ReduceOp::sum, 1, in_place),
                     PlanTuning{4096, 4});
}

TEST_CASE("reduce scratch stays bounded for a 3 GiB buffer") {
  const size_t count = (size_t{3} << 30) / 4;
  for (const ReduceCandidate& algorithm : reduce_candidates)
    for (int rank : {0, 1, 2, 4}) {
      Call call = reduce_call(6, count, DataType::float32, ReduceOp::sum, 2, true);
      call.rank = rank;
      REQUIRE(algorithm.build(call, default_tuning).scratch_bytes <= reduce_scratch_bound(call, default_tuning));
    }
}

TEST_CASE("reduce costs: binomial wins small messages, reduce-scatter-gather large ones") {
  CostModel model;
  model.alpha_seconds = 1e-5;
  model.beta_seconds_per_byte = 1e-9;
  model.gamma_seconds_per_byte = 0;
  Call call = reduce_call(8, 1000, DataType::float32, ReduceOp::sum, 0, true);
  REQUIRE(binomial_reduce.cost_seconds(call, model) == Approx(3 * (1e-5 + 4000e-9)));
  REQUIRE(reduce_scatter_gather_reduce.cost_seconds(call, model) == Approx(6e-5 + 1.75 * 4000e-9));
  call.count = 4;
  REQUIRE(binomial_reduce.cost_seconds(call, model) < reduce_scatter_gather_reduce.cost_seconds(call, model));
  call.count = 1 << 20;
  REQUIRE(reduce_scatter_gather_reduce.cost_seconds(call, model) < binomial_reduce.cost_seconds(call, model));
}
