// Binomial-tree broadcast from any root, segmented so that a rank forwards
// the first segments to its children while later ones are still arriving.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: ceil(log2 P) (alpha + n beta): the unsegmented tree, an upper bound.
extern const AlgorithmFunctions binomial_broadcast;

}  // namespace chorus::algorithms
