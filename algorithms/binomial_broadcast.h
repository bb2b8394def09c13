// Binomial-tree broadcast from any root, segmented so that a rank forwards
// the first segments to its children while later ones are still arriving.
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool binomial_broadcast_supports(const Call& call);
Plan binomial_broadcast_plan(const Call& call, const PlanTuning& tuning);
// ceil(log2 P) (alpha + n beta): the unsegmented tree, an upper bound.
double binomial_broadcast_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
