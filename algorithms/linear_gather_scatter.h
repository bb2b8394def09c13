// Linear gather (gatherv) and scatter (scatterv): the root exchanges one
// message directly with every other rank. P-1 latencies at the root, but
// every block crosses one link once and nothing is copied, so it wins for
// large blocks.
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool linear_gather_supports(const Call& call);
Plan linear_gather_plan(const Call& call, const PlanTuning& tuning);
bool linear_scatter_supports(const Call& call);
Plan linear_scatter_plan(const Call& call, const PlanTuning& tuning);
// Both: (P-1) alpha + (n - own block) beta at the root, n the bytes of all blocks.
double linear_gather_scatter_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
