// Two-level allgather (and allgatherv) for jobs whose ranks share hosts.
//
// Each rank sends its block once to every other host, to the rank there
// with the same local rank (modulo that host's rank count); then every rank
// passes the blocks it received, and its own, to the other ranks of its
// host. A host's uplink carries its own blocks out once per other host and
// the other hosts' blocks in once: (P - L)/P of the output, where a ring
// over the ranks in rank order carries (P - 1)/P through every uplink it
// crosses (on 2 hosts of 2: half the output instead of three quarters).
// Both phases are direct exchanges, two rounds of latency whatever P is.
#pragma once

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

bool hierarchical_allgather_supports(const Call& call);
Plan hierarchical_allgather_plan(const Call& call, const PlanTuning& tuning);
// Both rounds' latencies plus the busier of the uplink and the host's memory.
double hierarchical_allgather_cost(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
