// Two-level reduce-scatter (and reduce_scatter_v) for jobs whose ranks share
// hosts: the mirror image of the two-level allgather.
//
// Within each host, every rank sends its contribution to block b to the
// host's agent for b (b itself if b lives here, else the rank with local
// rank local_rank(b) mod (ranks here)), which sums the host's share; then
// each agent sends its host's partial sum of b to b, which adds the other
// hosts' partials to its own. A host's uplink carries one partial per
// foreign block out and one per own block and other host in: (P - L)/P of
// the input, where a ring over the ranks in rank order carries (P - 1)/P
// through every uplink it crosses.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: both rounds' latencies plus the busier of the uplink and the host's
// memory, and the exposed reductions.
extern const AlgorithmFunctions hierarchical_reduce_scatter;

}  // namespace chorus::algorithms
