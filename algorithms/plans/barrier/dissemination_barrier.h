// Dissemination barrier: ceil(log2 P) rounds of empty messages; in round k
// rank r tells r + 2^k and hears from r - 2^k. After the last round every rank
// has (transitively) heard from every other, so none leaves before all arrived.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: ceil(log2 P) alpha.
extern const AlgorithmFunctions dissemination_barrier;

}  // namespace chorus::algorithms
