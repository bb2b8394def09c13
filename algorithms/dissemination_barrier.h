// Dissemination barrier: ceil(log2 P) rounds of empty messages; in round k
// rank r tells r + 2^k and hears from r - 2^k. After the last round every rank
// has (transitively) heard from every other, so none leaves before all arrived.
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool dissemination_barrier_supports(const Call& call);
Plan dissemination_barrier_plan(const Call& call, const PlanTuning& tuning);
// ceil(log2 P) alpha.
double dissemination_barrier_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
