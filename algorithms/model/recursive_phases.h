// The rounds that recursive doubling, halving-doubling, recursive-halving
// reduce-scatter and reduce-scatter-gather reduce are made of, on the
// segments of a SegmentedReduction whose groups are numbered by the new ranks
// of a PowerOfTwoFold (group i ends on new rank i).
#pragma once

#include "algorithms/model/power_of_two_fold.h"
#include "algorithms/model/reduction_segments.h"

namespace chorus::algorithms {

// Elements of group `group` of the `groups` groups a buffer of `count`
// elements is cut into (group i ends reduced on new rank i); exposed so tests
// can check bytes sent.
size_t halving_group_elements(size_t count, int groups, int group);

// The folded-out rank sends all its segments to its partner, which reduces
// them into its own.
void fold_in(SegmentedReduction& segments, const PowerOfTwoFold& fold);
// Recursive doubling: in each of log2 P' rounds exchange every segment with
// the partner at distance 1, 2, 4... and reduce. Survivors only.
void exchange_all(SegmentedReduction& segments, const PowerOfTwoFold& fold);
// Recursive halving: in each round give the half of the current groups that
// the partner keeps and reduce the partner's copy of the half kept here;
// afterwards new rank i holds group i reduced over every rank. Survivors only.
void reduce_scatter_by_halving(SegmentedReduction& segments, const PowerOfTwoFold& fold);
// Recursive doubling allgather of the groups (after halving). Survivors only.
void allgather_by_doubling(SegmentedReduction& segments, const PowerOfTwoFold& fold);
// Binomial gather of the groups onto new rank 0 (after halving). Survivors only.
void gather_to_first(SegmentedReduction& segments, const PowerOfTwoFold& fold);
// The partner sends the result of groups [first, last) to the folded-out rank.
void fold_out(SegmentedReduction& segments, const PowerOfTwoFold& fold, size_t first_segment, size_t last_segment);

// A whole allreduce among any number of ranks, the buffer cut into `groups`
// groups (1, or P' for the halving rounds) and every group into segments: the
// extra ranks fold in, `exchange` runs among the P' power-of-two ranks, the
// extras get the result back, and every segment settles in the output.
using FoldedExchange = void (*)(SegmentedReduction& segments, const PowerOfTwoFold& fold);
Plan folded_allreduce_plan(const Call& call, const PlanTuning& tuning, int groups, FoldedExchange exchange);

}  // namespace chorus::algorithms
