// Ring allreduce checked in the simulator: bit-exact results for every op,
// many rank counts and awkward counts, in and out of place; bytes sent equal
// to the bandwidth-optimal formula; scratch bounded by the tuning.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>

#include "algorithms/plans/allreduce/ring_allreduce.h"
#include "base/log.h"
#include "test/algorithms/job_buffers.h"
#include "test/algorithms/reduction_checks.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

std::string first_difference(const Call& call, const std::vector<std::byte>& actual,
                             const std::vector<std::byte>& expected) {
  if (actual == expected) return "";
  const size_t element = element_size(call.type);
  for (size_t i = 0; i < call.count; ++i)
    if (std::memcmp(actual.data() + i * element, expected.data() + i * element, element) != 0)
      return cat("element ", i, " is ", load_value(call.type, actual.data(), i), ", expected ",
                 load_value(call.type, expected.data(), i));
  return "sizes differ";
}

void check_ring(const Call& call, const PlanTuning& tuning) {
  INFO(to_string(call.type) << " " << to_string(call.op) << " count " << call.count << " on " << call.size
                            << " ranks, " << (call.in_place ? "in place" : "out of place") << ", segments of "
                            << tuning.segment_bytes << " bytes");
  const std::vector<Plan> plans = build_plans(ring_allreduce.build, call, tuning);
  JobBuffers job =
      JobBuffers::make(call, [&](int rank, size_t i) { return reduction_input(call.op, call.size, rank, i); });
  const std::vector<std::byte> inputs_before = job.inputs.empty() ? std::vector<std::byte>() : job.inputs[0];
  SimulationReport report = simulate(plans, job.views(), call);

  const std::vector<std::byte> expected =
      expected_bytes(call, [&](size_t i) { return reduction_result(call.op, call.size, i); });
  const size_t element = element_size(call.type);
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank);
    REQUIRE(first_difference(call, job.outputs[rank], expected) == "");
    // Each rank sends every chunk twice except the one it finishes reducing
    // (r+1) in the reduce-scatter and the one it receives last (r+2) in the allgather.
    size_t expected_sent = 0;
    if (call.size > 1)
      expected_sent = element * (2 * call.count - ring_chunk_elements(call.count, call.size, (rank + 1) % call.size) -
                                 ring_chunk_elements(call.count, call.size, (rank + 2) % call.size));
    REQUIRE(report.ranks[rank].bytes_sent == expected_sent);
    const double optimal = 2.0 * (call.size - 1) / call.size * static_cast<double>(call.bytes());
    REQUIRE(std::abs(static_cast<double>(report.ranks[rank].bytes_sent) - optimal) <= 2.0 * element);
    REQUIRE(plans[rank].scratch_bytes <= tuning.scratch_segments * tuning.segment_bytes);
    if (!call.in_place) REQUIRE(plans[rank].scratch_bytes == 0);
  }
  if (!call.in_place) REQUIRE(job.inputs[0] == inputs_before);
}

std::vector<int> rank_counts() {
  std::vector<int> sizes;
  for (int size = 1; size <= 16; ++size) sizes.push_back(size);
  for (int size : {17, 24, 33}) sizes.push_back(size);
  return sizes;
}

}  // namespace

TEST_CASE("ring allreduce int32: every op, rank count and awkward count, in and out of place", "[sweep]") {
  for (int size : rank_counts())
    for (size_t count : reduction_counts(size))
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg,
                          ReduceOp::band, ReduceOp::bor, ReduceOp::bxor})
        for (bool in_place : {true, false}) {
          Call call = make_call(Collective::allreduce, 0, size, count, DataType::int32, op, 0, in_place);
          check_ring(call, tiny_segments);
          if (count == 1009) check_ring(call, default_tuning);
        }
}

TEST_CASE("ring allreduce float32: arithmetic ops, every rank count, in and out of place") {
  for (int size : rank_counts())
    for (size_t count : reduction_counts(size))
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg})
        for (bool in_place : {true, false})
          check_ring(make_call(Collective::allreduce, 0, size, count, DataType::float32, op, 0, in_place), tiny_segments);
}

TEST_CASE("ring allreduce float16, bfloat16, int8 and float64") {
  for (int size : {1, 2, 3, 5, 8, 13})
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}})
      for (DataType type : {DataType::float16, DataType::bfloat16, DataType::int8, DataType::float64})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg})
          for (bool in_place : {true, false})
            check_ring(make_call(Collective::allreduce, 0, size, count, type, op, 0, in_place), tiny_segments);
  for (ReduceOp op : {ReduceOp::band, ReduceOp::bor, ReduceOp::bxor})
    check_ring(make_call(Collective::allreduce, 0, 5, 1009, DataType::int8, op, 0, true), tiny_segments);
}

TEST_CASE("ring allreduce of 100003 elements pipelines segments across the ring") {
  for (int size : {1, 2, 3, 7, 16, 33})
    for (bool in_place : {true, false}) {
      check_ring(make_call(Collective::allreduce, 0, size, 100003, DataType::int32, ReduceOp::sum, 0, in_place),
                 PlanTuning{4096, 4});
      check_ring(make_call(Collective::allreduce, 0, size, 100003, DataType::float32, ReduceOp::max, 0, in_place),
                 default_tuning);
    }
}

TEST_CASE("ring allreduce scratch does not grow with the buffer") {
  // 3 GiB of float32 on 8 ranks: only the plan is built, no data moves.
  const size_t count = (size_t{3} << 30) / 4;
  const PlanTuning tuning{};
  for (int rank : {0, 5}) {
    Call call = make_call(Collective::allreduce, rank, 8, count, DataType::float32, ReduceOp::sum, 0, true);
    Plan plan = ring_allreduce.build(call, tuning);
    REQUIRE(plan.scratch_bytes <= tuning.scratch_segments * tuning.segment_bytes);
    size_t sent = 0;
    for (const Step& step : plan.steps())
      if (step.kind == StepKind::send) sent += step.from.length;
    REQUIRE(sent == call.bytes() / 8 * 14);  // 2 (P-1)/P of 3 GiB, divisible here
  }
}

TEST_CASE("ring allreduce cost follows the alpha-beta-gamma formula") {
  CostModel model;
  model.alpha_seconds = 1e-5;
  model.beta_seconds_per_byte = 1e-9;
  model.gamma_seconds_per_byte = 0;
  Call call = make_call(Collective::allreduce, 0, 4, 1000, DataType::float32, ReduceOp::sum, 0, true);
  REQUIRE(ring_allreduce.cost_seconds(call, model) == Approx(6 * 1e-5 + 1.5 * 4000 * 1e-9));
  call.size = 1;
  REQUIRE(ring_allreduce.cost_seconds(call, model) == 0.0);
}
