// Halving-doubling (Rabenseifner) allreduce: a reduce-scatter by recursive
// halving, then an allgather by recursive doubling. Bandwidth-optimal like the
// ring (each rank sends 2 (P'-1)/P' of the buffer) but in 2 log2 P rounds
// instead of 2 (P-1), so it wins for mid-size messages and many ranks. Any
// rank count: the extra ranks fold their data in first and get the result at
// the end; the halving and doubling rounds are perfectly balanced.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: 2 log2(P') alpha + 2 (P'-1)/P' n beta + (P'-1)/P' n gamma, plus
// 2 (alpha + n beta) + n gamma when P is not a power of two.
extern const AlgorithmFunctions halving_doubling_allreduce;

}  // namespace chorus::algorithms
