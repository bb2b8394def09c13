// Recursive-doubling allgather (and allgatherv) for a power-of-two number of
// ranks: log2 P exchanges with partners rank ^ 2^k, each doubling the range
// of blocks a rank holds. Fewest latencies of any allgather, same bytes as
// the ring, so it wins for small blocks; other rank counts are refused
// (Bruck serves those).
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool recursive_doubling_allgather_supports(const Call& call);
Plan recursive_doubling_allgather_plan(const Call& call, const PlanTuning& tuning);
// log2 P alpha + (P-1)/P n beta, n the bytes of the whole result.
double recursive_doubling_allgather_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
