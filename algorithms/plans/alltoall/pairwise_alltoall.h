// Pairwise alltoall (and alltoallv): P-1 rounds, in round k rank r sends its
// block for r+k and receives the block from r-k, so every rank sends and
// receives exactly one message per round on any rank count. Every byte
// crosses one link once: the algorithm for anything but tiny blocks.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: (P-1) (alpha + b beta), b the bytes of one block (the largest, for alltoallv).
extern const AlgorithmFunctions pairwise_alltoall;

// The layout of an alltoall call's two buffers: byte offsets of the block
// for/from each peer (fixed count or send_counts/recv_counts).
struct AlltoallLayout {
  explicit AlltoallLayout(const Call& call);
  std::vector<size_t> send_offsets, receive_offsets;
};

}  // namespace chorus::algorithms
