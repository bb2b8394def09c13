// Recursive-halving reduce-scatter (and reduce_scatter_v): log2 P rounds, each
// giving the partner at distance P/2, P/4... the half of the remaining blocks
// it will own and reducing the half this rank keeps. Each rank sends all
// blocks but its own once, in log2 P messages instead of the ring's P-1, so
// it wins for small and mid-size blocks. Any rank count: extra ranks fold
// their input into a partner first and get their block back at the end.
//
// Buffers as for ring_reduce_scatter (out of place only).
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: per piece of the buffer log2(P') alpha (+2 alpha when P is not a power of
// two), plus (P'-1)/P' N (beta + gamma), plus N (beta + gamma) + N/P beta
// for the folding; N the bytes of all blocks.
extern const AlgorithmFunctions recursive_halving_reduce_scatter;

}  // namespace chorus::algorithms
