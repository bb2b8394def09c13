// Binomial-tree reduce to any root: ceil(log2 P) rounds; a rank adds what its
// children send (smallest subtree first) and passes the sum to its parent.
// Latency-optimal, so it wins for small messages. Segmented, so for large
// buffers the tree works as a pipeline.
//
// The result lands in the root's output; other ranks' outputs are not
// touched (they may pass none). In place: input == output on every rank.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: ceil(log2 P) (alpha + n beta + n gamma).
extern const AlgorithmFunctions binomial_reduce;

}  // namespace chorus::algorithms
