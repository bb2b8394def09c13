// Two-level allgather (and allgatherv) for jobs whose ranks share hosts.
//
// Each rank sends its block once to every other host, to the rank there
// with the same local rank (modulo that host's rank count); then every rank
// passes the blocks it received, and its own, to the other ranks of its
// host. A host's uplink carries its own blocks out once per other host and
// the other hosts' blocks in once: (P - L)/P of the output, where a ring
// over the ranks in rank order carries (P - 1)/P through every uplink it
// crosses (on 2 hosts of 2: half the output instead of three quarters).
// Both phases are direct exchanges, two rounds of latency whatever P is.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: both rounds' latencies plus the busier of the uplink and the host's memory.
extern const AlgorithmFunctions hierarchical_allgather;

}  // namespace chorus::algorithms
