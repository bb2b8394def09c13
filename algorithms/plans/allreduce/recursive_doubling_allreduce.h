// Recursive doubling allreduce: log2 P rounds, each exchanging the whole
// buffer with the rank at distance 1, 2, 4... and reducing. Latency-optimal,
// so it wins for small messages; each rank sends log2(P) times the buffer.
// Any rank count: the extra ranks fold in first and get the result at the end.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: log2(P') (alpha + n beta + n gamma), plus 2 (alpha + n beta) + n gamma
// when P is not a power of two (P' = largest power of two <= P).
extern const AlgorithmFunctions recursive_doubling_allreduce;

}  // namespace chorus::algorithms
