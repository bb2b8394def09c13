// Two-level broadcast: the root sends to one leader per host (the flat
// broadcast the remote links favour, among the leaders), then each leader
// broadcasts within its host (the flat broadcast shared memory favours).
// Each host's uplink carries the buffer once, where a flat chain or tree
// laid over the ranks in rank order may cross it several times, and the
// network's latency is paid for log2(H) rounds of a tree, not log2(P).
// The root leads its own host; elsewhere the lowest rank leads. The phases
// pipeline segment by segment (composed_plan.h).
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: the leaders' broadcast plus the slowest host's.
extern const AlgorithmFunctions hierarchical_broadcast;

}  // namespace chorus::algorithms
