// Broadcast for large messages: the root scatters the buffer in P chunks
// down a binomial tree, then a ring allgather reassembles it everywhere. The
// root sends about 2n bytes instead of the binomial tree's n log2 P, and
// every link carries about 2n/P per step.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: scatter ceil(log2 P) alpha + (P-1)/P n beta, then ring allgather
// (P-1) alpha + (P-1)/P n beta.
extern const AlgorithmFunctions scatter_allgather_broadcast;

// Relative rank v (rank - root mod P) owns chunk v of the buffer after the
// scatter; chunks are ring_chunk_elements(count, P, v) long. The scatter
// tree: v's parent is v minus its lowest set bit, so v's subtree is the
// contiguous chunk range [v, scatter_subtree_end(v, P)).
int scatter_subtree_end(int relative, int size);

}  // namespace chorus::algorithms
