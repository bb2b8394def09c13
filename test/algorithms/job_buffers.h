// Test helpers: per-rank buffers of any DataType holding small integers, and
// running every rank's Plan of one algorithm through the simulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "algorithms/model/call.h"
#include "algorithms/model/plan.h"
#include "simulation/simulator.h"

namespace chorus::algorithms::testing {

// Small integers only: every type holds them exactly.
void store_value(DataType type, std::byte* base, size_t index, int64_t value);
int64_t load_value(DataType type, const std::byte* base, size_t index);

struct JobBuffers {
  std::vector<std::vector<std::byte>> inputs;   // empty for in place
  std::vector<std::vector<std::byte>> outputs;

  // Fills every rank's data with value(rank, index); for an out-of-place call
  // the outputs start as garbage (0xee bytes).
  static JobBuffers make(const Call& call, const std::function<int64_t(int rank, size_t index)>& value);
  std::vector<RankBuffers> views();
};

using PlanBuilder = Plan (*)(const Call&, const PlanTuning&);

std::vector<Plan> build_plans(PlanBuilder build, const Call& call, const PlanTuning& tuning);

// The bytes rank `rank` expects: expected(index) stored in the call's type.
std::vector<std::byte> expected_bytes(const Call& call, const std::function<int64_t(size_t index)>& expected);

}  // namespace chorus::algorithms::testing
