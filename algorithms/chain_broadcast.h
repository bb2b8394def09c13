// Pipelined chain broadcast for very large messages: root -> root+1 -> ...
// -> root-1, the buffer cut into segments that flow down the chain one
// behind the other. Every rank sends the buffer at most once and every link
// is busy at once, so with many segments the time approaches n beta
// regardless of P; the P-1 hops of latency make it lose for small buffers.
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool chain_broadcast_supports(const Call& call);
Plan chain_broadcast_plan(const Call& call, const PlanTuning& tuning);
// Segments sized for the model: P - 2 fill stages (segment_size.h).
PlanTuning chain_broadcast_tuning(const Call& call, const CostModel& model);
// With the S segments of chain_broadcast_tuning: (P - 2 + S) (alpha + n/S beta).
double chain_broadcast_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
