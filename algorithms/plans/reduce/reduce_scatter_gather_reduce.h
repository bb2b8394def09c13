// Reduce-scatter-gather (Rabenseifner) reduce to any root: a reduce-scatter by
// recursive halving, then a binomial gather of the reduced groups to the root.
// Each rank sends about 2 (P-1)/P of the buffer instead of the whole buffer
// per tree level, so it wins for large messages. Any rank count: the extra
// ranks fold their data in first (the root never folds out).
//
// The result lands in the root's output; other ranks' outputs are not
// touched. In place: input == output on every rank.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: per piece of the buffer 2 log2(P') alpha (+1 when P is not a power of
// two), plus (P'-1)/P' n (2 beta + gamma), plus n (beta + gamma) for folding.
extern const AlgorithmFunctions reduce_scatter_gather_reduce;

}  // namespace chorus::algorithms
