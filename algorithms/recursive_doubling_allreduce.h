// Recursive doubling allreduce: log2 P rounds, each exchanging the whole
// buffer with the rank at distance 1, 2, 4... and reducing. Latency-optimal,
// so it wins for small messages; each rank sends log2(P) times the buffer.
// Any rank count: the extra ranks fold in first and get the result at the end.
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool recursive_doubling_allreduce_supports(const Call& call);
Plan recursive_doubling_allreduce_plan(const Call& call, const PlanTuning& tuning);
// log2(P') (alpha + n beta + n gamma), plus 2 (alpha + n beta) + n gamma
// when P is not a power of two (P' = largest power of two <= P).
double recursive_doubling_allreduce_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
