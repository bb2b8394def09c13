// Bruck alltoall for a fixed count: ceil(log2 P) rounds instead of P-1, each
// sending about half of the buffer (packed into one message), so it wins
// only when blocks are small enough that latency dominates.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: sum over rounds k of (alpha + m_k b beta), m_k the number of block indices
// in [0, P) with bit k set and b one block's bytes, plus the packing and
// rotation copies (about (2 + 2 log2 P / 2) P b gamma).
extern const AlgorithmFunctions bruck_alltoall;
// m_k above: how many blocks round k of a P-rank Bruck alltoall sends.
size_t bruck_alltoall_round_blocks(int size, int round);

}  // namespace chorus::algorithms
