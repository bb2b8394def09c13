// Ring allreduce: a reduce-scatter then an allgather around the ring of ranks.
// Bandwidth-optimal: each rank sends 2 * (P - 1) / P of the buffer.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: 2 (P-1) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma.
extern const AlgorithmFunctions ring_allreduce;

// How the buffer is cut into one chunk per rank (chunks differ by at most one
// element); exposed so tests can check bytes sent against the exact split.
size_t ring_chunk_elements(size_t count, int size, int chunk);

}  // namespace chorus::algorithms
