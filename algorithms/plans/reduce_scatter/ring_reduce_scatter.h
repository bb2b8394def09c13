// Ring reduce-scatter (and reduce_scatter_v): P-1 steps around the ring; in
// step k each rank passes its running partial of one block to the right,
// adding its own input to what arrives from the left, so block r ends on rank
// r. Bandwidth-optimal (each rank sends all blocks but its own once).
//
// Buffers: input holds every rank's block in rank order (block r starts at
// Call::block_offset(r)); output receives this rank's block. In place is not
// supported: input and output must be distinct buffers.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: (P-1) alpha + (P-1)/P N (beta + gamma), N the bytes of all blocks.
extern const AlgorithmFunctions ring_reduce_scatter;

// Both reduce-scatter algorithms accept: out of place, and per-rank counts
// (if any) for every rank.
bool reduce_scatter_call_is_valid(const Call& call);

}  // namespace chorus::algorithms
