// Test helpers for the reduction collectives (allreduce, reduce,
// reduce_scatter): inputs every type holds exactly whose reductions stay
// small, a whole job simulated with any of those collectives' buffer shapes,
// and bit-exact checks of every rank's output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/model/call.h"
#include "algorithms/model/plan.h"
#include "simulation/simulator.h"

namespace chorus::algorithms::testing {

int64_t reduction_input(ReduceOp op, int size, int rank, size_t index);
// The reduction over all ranks of reduction_input(op, size, rank, index)
// (for avg: the exact average, which the inputs are chosen to have).
int64_t reduction_result(ReduceOp op, int size, size_t index);

struct ReductionRun {
  SimulationReport report;
  std::vector<Plan> plans;
  std::vector<std::vector<std::byte>> outputs;
};

using Builder = Plan (*)(const Call&, const PlanTuning&);

// Simulates every rank's plan of `build` for `call` on reduction_input data
// and REQUIREs (Catch2) every rank's output to be exactly right: the whole
// reduction for allreduce, the root's for reduce (other outputs untouched),
// each rank's own block for reduce_scatter (index = position in the input).
// Also requires the inputs to be unchanged.
ReductionRun run_and_check(Builder build, const Call& call, const PlanTuning& tuning);

// The tunings the reduction tests run under: the default, and 64-byte
// segments that cut even small buffers into many pipelined pieces.
extern const PlanTuning default_tuning;
extern const PlanTuning tiny_segments;

// Every rank count the issue asks for, and the awkward element counts.
std::vector<int> reduction_rank_counts();
std::vector<size_t> reduction_counts(int size);
std::vector<ReduceOp> reduction_ops_all();
std::vector<ReduceOp> reduction_ops_arithmetic();

}  // namespace chorus::algorithms::testing
