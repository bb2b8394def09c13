// Test helpers for the data-movement collectives (broadcast, allgather,
// gather, scatter, alltoall): the buffers of a whole job laid out per
// collective, the inputs every rank starts with, the result every rank must
// end with, and running one registered algorithm through the simulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "algorithms/model/call.h"
#include "algorithms/model/plan.h"
#include "algorithms/selection/registry.h"
#include "simulation/simulator.h"

namespace chorus::algorithms::testing {

// The element every rank contributes at `index` of its data; small integers,
// distinct across ranks and positions, exact in every type.
int64_t movement_value(int rank, size_t index);

struct MovementRun {
  std::vector<Plan> plans;
  SimulationReport report;
  std::vector<std::vector<std::byte>> inputs, outputs;  // after the run
};

// Builds every rank's plan with `algorithm`, fills the buffers for the
// call's collective (in place as call.in_place says), simulates, and checks
// every rank's output bit-exactly (REQUIRE). Returns the run for more checks.
MovementRun run_and_check(const Algorithm& algorithm, const Call& call, const PlanTuning& tuning);

// Bytes of each rank's block (call.counts or the fixed count).
std::vector<size_t> block_bytes(const Call& call);

// Counts in [0, max_count], about a third of them zero.
std::vector<size_t> random_counts(std::mt19937& random, int size, size_t max_count);

// What one rank sends over a run, by an algorithm's own description.
struct ExpectedSends {
  size_t bytes = 0, messages = 0;
};

// 64-byte segments of at most 4 in flight: even small buffers are cut into
// many pipelined pieces.
extern const PlanTuning tiny_movement_segments;

// {0, 1, 2, size-1, size+1, 1009}.
std::vector<size_t> awkward_counts(int size);

// What the INFO line of a failing check should say about the call.
std::string describe(const Call& call, const Algorithm& algorithm);

}  // namespace chorus::algorithms::testing
