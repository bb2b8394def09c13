// Binomial-tree reduce to any root: ceil(log2 P) rounds; a rank adds what its
// children send (smallest subtree first) and passes the sum to its parent.
// Latency-optimal, so it wins for small messages. Segmented, so for large
// buffers the tree works as a pipeline.
//
// The result lands in the root's output; other ranks' outputs are not
// touched (they may pass none). In place: input == output on every rank.
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool binomial_reduce_supports(const Call& call);
Plan binomial_reduce_plan(const Call& call, const PlanTuning& tuning);
// ceil(log2 P) (alpha + n beta + n gamma).
double binomial_reduce_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
