// Two-level allreduce for jobs whose ranks share hosts: the bytes crossing a
// host's uplink shrink from the flat ring's 2 (P-1)/P n to 2 (H-1)/H n.
//
// "hierarchical" (large messages): the buffer is cut into S slices, S the
// largest number of ranks on one host; on a host of L ranks, local rank l
// holds the slices s with s mod L == l.
//   1. reduce-scatter within each host: every rank sends each slice to the
//      rank of its host that holds it, which adds them up;
//   2. for every slice, an allreduce among the ranks holding it, one per
//      host (a "rail"), with the flat algorithm the remote links favour;
//   3. allgather within each host: each holder sends its reduced slices to
//      the other ranks of its host.
// Uneven hosts work the same way: a host with fewer ranks than slices gives
// some ranks several slices (a single-rank host holds them all).
//
// "hierarchical_leader" (small messages): reduce to one leader per host,
// allreduce among the leaders, broadcast from each leader to its host: two
// local steps and one remote phase, so the latency of the network is paid
// for log2(H) rounds, not log2(P).
//
// Both need a call spanning two or more hosts with some host holding two or
// more ranks (hierarchy.h); each phase runs the flat algorithm the cost
// model of its level prefers. Phases meet through the memory they touch
// (composed_plan.h), so they pipeline segment by segment.
#pragma once

#include "algorithms/model/algorithm_functions.h"

namespace chorus::algorithms {

// Cost: pipelined phases: every phase's latency (the direct local exchanges, the
// rails' flat allreduce, once per slice a rank holds), plus the busier of the
// host's memory (2 (L-1)/L n through the local links) and its uplink (which
// all rails share: a flat allreduce of n bytes among H ranks).
extern const AlgorithmFunctions hierarchical_allreduce;

// Cost: the slowest host's local reduce and broadcast plus the leaders' allreduce.
extern const AlgorithmFunctions hierarchical_leader_allreduce;

}  // namespace chorus::algorithms
