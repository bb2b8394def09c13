// Binomial-tree gather (gatherv) and scatter (scatterv) to/from any root:
// ceil(log2 P) rounds instead of P-1, at the price of forwarding blocks
// through intermediate ranks (about (n/2) log2 P bytes moved in total) and a
// scratch buffer there, so it wins for small blocks.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Both cost: ceil(log2 P) alpha + (P-1)/P n beta (the root's link carries every
// block but its own), plus n gamma for the copies through scratch.
extern const AlgorithmFunctions binomial_gather, binomial_scatter;

}  // namespace chorus::algorithms
