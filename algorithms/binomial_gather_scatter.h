// Binomial-tree gather (gatherv) and scatter (scatterv) to/from any root:
// ceil(log2 P) rounds instead of P-1, at the price of forwarding blocks
// through intermediate ranks (about (n/2) log2 P bytes moved in total) and a
// scratch buffer there, so it wins for small blocks.
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool binomial_gather_supports(const Call& call);
Plan binomial_gather_plan(const Call& call, const PlanTuning& tuning);
bool binomial_scatter_supports(const Call& call);
Plan binomial_scatter_plan(const Call& call, const PlanTuning& tuning);
// Both: ceil(log2 P) alpha + (P-1)/P n beta (the root's link carries every
// block but its own), plus n gamma for the copies through scratch.
double binomial_gather_scatter_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
