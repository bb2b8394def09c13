// Simulating reduction collectives and checking their results bit-exactly.
#include "test/algorithms/reduction_checks.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "test/algorithms/job_buffers.h"

namespace chorus::algorithms::testing {

int64_t reduction_input(ReduceOp op, int size, int rank, size_t index) {
  const int64_t r = rank, x = static_cast<int64_t>(index % 1000003);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::min:
    case ReduceOp::max: return (r * 5 + x * 11 + 3) % 9 - 4;
    case ReduceOp::prod: return (r + x) % 13 == 0 ? 2 : ((r * 3 + x) % 7 == 0 ? -1 : 1);
    // Offsets that sum to zero: the average is exactly x % 9 - 4.
    case ReduceOp::avg: return x % 9 - 4 + (rank == 0 ? -(size - 1) : 1);
    case ReduceOp::band: return 0x7f ^ ((r + x) % 6 == 0 ? (1 << (x % 7)) : 0);
    case ReduceOp::bor: return (r + x) % 6 == 0 ? (1 << ((r + 3 * x) % 7)) : 0;
    case ReduceOp::bxor: return (r * 29 + x * 19) & 0x7f;
  }
  return 0;
}

int64_t reduction_result(ReduceOp op, int size, size_t index) {
  if (op == ReduceOp::avg) return static_cast<int64_t>(index % 1000003) % 9 - 4;
  int64_t result = reduction_input(op, size, 0, index);
  for (int rank = 1; rank < size; ++rank) {
    const int64_t value = reduction_input(op, size, rank, index);
    switch (op) {
      case ReduceOp::sum: result += value; break;
      case ReduceOp::prod: result *= value; break;
      case ReduceOp::min: result = std::min(result, value); break;
      case ReduceOp::max: result = std::max(result, value); break;
      case ReduceOp::band: result &= value; break;
      case ReduceOp::bor: result |= value; break;
      case ReduceOp::bxor: result ^= value; break;
      case ReduceOp::avg: break;
    }
  }
  return result;
}

namespace {

size_t input_elements(const Call& call) {
  return call.collective == Collective::reduce_scatter ? call.total_count() : call.count;
}

// Where rank's output element j comes from in the inputs, or no value for
// outputs that must stay untouched.
bool output_source(const Call& call, int rank, size_t j, size_t& index) {
  switch (call.collective) {
    case Collective::reduce_scatter: index = call.block_offset(rank) + j; return true;
    case Collective::reduce: index = j; return rank == call.root;
    default: index = j; return true;
  }
}

size_t output_elements(const Call& call, int rank) {
  return call.collective == Collective::reduce_scatter ? call.block_count(rank) : call.count;
}

}  // namespace

ReductionRun run_and_check(Builder build, const Call& call, const PlanTuning& tuning) {
  INFO(to_string(call.collective) << " " << to_string(call.type) << " " << to_string(call.op) << " count "
                                  << call.count << (call.counts.empty() ? "" : " (v)") << " on " << call.size
                                  << " ranks, root " << call.root << ", "
                                  << (call.in_place ? "in place" : "out of place") << ", segments of "
                                  << tuning.segment_bytes << " bytes");
  const size_t element = element_size(call.type);
  ReductionRun run;
  run.plans = build_plans(build, call, tuning);
  std::vector<std::vector<std::byte>> inputs;
  for (int rank = 0; rank < call.size; ++rank) {
    std::vector<std::byte> data(input_elements(call) * element);
    for (size_t i = 0; i < input_elements(call); ++i)
      store_value(call.type, data.data(), i, reduction_input(call.op, call.size, rank, i));
    inputs.push_back(data);
    run.outputs.push_back(call.in_place ? data : std::vector<std::byte>(output_elements(call, rank) * element,
                                                                        std::byte{0xee}));
  }
  const std::vector<std::vector<std::byte>> inputs_before = inputs;
  const std::vector<std::vector<std::byte>> outputs_before = run.outputs;
  std::vector<RankBuffers> views(static_cast<size_t>(call.size));
  for (int rank = 0; rank < call.size; ++rank) {
    views[rank].input = inputs[rank].data();
    views[rank].output = run.outputs[rank].data();
  }
  run.report = simulate(run.plans, views, call);

  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank);
    REQUIRE(inputs[rank] == inputs_before[rank]);
    const std::vector<std::byte>& output = run.outputs[rank];
    REQUIRE(output.size() == output_elements(call, rank) * element);
    for (size_t j = 0; j < output_elements(call, rank); ++j) {
      size_t index = 0;
      const bool has_result = output_source(call, rank, j, index);
      if (!has_result) {
        if (std::memcmp(output.data() + j * element, outputs_before[rank].data() + j * element, element) != 0)
          FAIL("element " << j << " of a non-root output was touched");
        continue;
      }
      std::vector<std::byte> expected(element);
      store_value(call.type, expected.data(), 0, reduction_result(call.op, call.size, index));
      if (std::memcmp(output.data() + j * element, expected.data(), element) != 0)
        FAIL("element " << j << " is " << load_value(call.type, output.data(), j) << ", expected "
                        << load_value(call.type, expected.data(), 0));
    }
  }
  return run;
}

const PlanTuning default_tuning{};
const PlanTuning tiny_segments{64, 3};

std::vector<int> reduction_rank_counts() {
  std::vector<int> sizes;
  for (int size = 1; size <= 33; ++size) sizes.push_back(size);
  return sizes;
}

std::vector<size_t> reduction_counts(int size) {
  return {0, 1, 2, static_cast<size_t>(size - 1), static_cast<size_t>(size + 1), 1009};
}

std::vector<ReduceOp> reduction_ops_all() {
  return {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
          ReduceOp::avg, ReduceOp::band, ReduceOp::bor, ReduceOp::bxor};
}

std::vector<ReduceOp> reduction_ops_arithmetic() {
  return {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg};
}

}  // namespace chorus::algorithms::testing
