// Bruck allgather (and allgatherv) for any number of ranks: ceil(log2 P)
// rounds, in round k a rank sends everything it has gathered so far (up to
// 2^k blocks) to rank - 2^k. As few latencies as recursive doubling without
// the power-of-two restriction, paid for with a scratch copy of the result
// and a final local rotation.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: ceil(log2 P) alpha + (P-1)/P n beta + n gamma (the rotation copies).
extern const AlgorithmFunctions bruck_allgather;

}  // namespace chorus::algorithms
