// Pipelined chain broadcast for very large messages: root -> root+1 -> ...
// -> root-1, the buffer cut into segments that flow down the chain one
// behind the other. Every rank sends the buffer at most once and every link
// is busy at once, so with many segments the time approaches n beta
// regardless of P; the P-1 hops of latency make it lose for small buffers.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Tuned with segments sized for the model: P - 2 fill stages (segment_size.h).
// Cost with S segments: (P - 2 + S) (alpha + n/S beta).
extern const AlgorithmFunctions chain_broadcast;

}  // namespace chorus::algorithms
