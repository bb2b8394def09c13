// Recursive-doubling allgather (and allgatherv) for a power-of-two number of
// ranks: log2 P exchanges with partners rank ^ 2^k, each doubling the range
// of blocks a rank holds. Fewest latencies of any allgather, same bytes as
// the ring, so it wins for small blocks; other rank counts are refused
// (Bruck serves those).
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: log2 P alpha + (P-1)/P n beta, n the bytes of the whole result.
extern const AlgorithmFunctions recursive_doubling_allgather;

}  // namespace chorus::algorithms
