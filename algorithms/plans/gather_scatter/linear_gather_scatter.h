// Linear gather (gatherv) and scatter (scatterv): the root exchanges one
// message directly with every other rank. P-1 latencies at the root, but
// every block crosses one link once and nothing is copied, so it wins for
// large blocks.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Both cost: (P-1) alpha + (n - own block) beta at the root, n the bytes of all blocks.
extern const AlgorithmFunctions linear_gather, linear_scatter;

}  // namespace chorus::algorithms
