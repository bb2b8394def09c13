// Recursive-halving reduce-scatter (and reduce_scatter_v): log2 P rounds, each
// giving the partner at distance P/2, P/4... the half of the remaining blocks
// it will own and reducing the half this rank keeps. Each rank sends all
// blocks but its own once, in log2 P messages instead of the ring's P-1, so
// it wins for small and mid-size blocks. Any rank count: extra ranks fold
// their input into a partner first and get their block back at the end.
//
// Buffers as for ring_reduce_scatter (out of place only).
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool recursive_halving_reduce_scatter_supports(const Call& call);
Plan recursive_halving_reduce_scatter_plan(const Call& call, const PlanTuning& tuning);
// Per piece of the buffer log2(P') alpha (+2 alpha when P is not a power of
// two), plus (P'-1)/P' N (beta + gamma), plus N (beta + gamma) + N/P beta
// for the folding; N the bytes of all blocks.
double recursive_halving_reduce_scatter_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
