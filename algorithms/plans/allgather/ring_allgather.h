// Ring allgather (and allgatherv): P-1 steps, in step k every rank forwards
// to its right neighbour the block it received in step k-1. Each rank sends
// (P-1)/P of the result, the least any allgather can, so it wins for large
// blocks; its P-1 latencies lose for small ones. Also the second half of the
// scatter + allgather broadcast, hence the reusable stage below.
#pragma once

#include <vector>

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: (P-1) alpha + (P-1)/P n beta, n the bytes of the whole result.
extern const AlgorithmFunctions ring_allgather;

// The ring part alone, appended to a plan. Ring positions are 0..size-1;
// `blocks[i]` is where position i's block lives in this rank's output.
struct RingAllgatherStage {
  int position = 0;
  int size = 1;
  int left = -1, right = -1;   // ranks of positions - 1 and + 1
  std::vector<Region> blocks;  // by position
  Region own_source;           // what this rank sends first (its block, maybe from the input)
  StepId own_ready = no_step;  // the step after which own_source holds the data
  // Per position, the step after which the block may be overwritten (empty:
  // no constraint).
  std::vector<StepId> writable_after;
  size_t segment_bytes = 0;    // a whole number of elements
  uint32_t first_slot = 0;
};
void append_ring_allgather(Plan& plan, const RingAllgatherStage& stage);

}  // namespace chorus::algorithms
