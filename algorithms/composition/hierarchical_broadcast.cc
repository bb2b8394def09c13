// Two-level broadcast as a composed Plan.
#include "algorithms/composition/hierarchical_broadcast.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "algorithms/composition/composed_plan.h"
#include "algorithms/composition/hierarchy.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {

bool hierarchical_broadcast_supports(const Call& call) {
  return call.collective == Collective::broadcast && call.root >= 0 && call.root < call.size && has_two_levels(call);
}

double hierarchical_broadcast_cost(const Call& call, const CostModel& model) {
  if (!has_two_levels(call)) return std::numeric_limits<double>::infinity();
  const Topology& topology = *call.topology;
  const CostModel local = model.at(LinkLevel::local);
  double slowest_host = 0;
  for (int host = 0; host < topology.hosts(); ++host) {
    const int ranks = static_cast<int>(topology.ranks_on(host).size());
    if (ranks > 1)
      slowest_host = std::max(
          slowest_host, cheapest_flat(phase_call(call, Collective::broadcast, 0, ranks, call.count, 0, true), local)
                            .seconds);
  }
  const Call leaders = phase_call(call, Collective::broadcast, 0, topology.hosts(), call.count,
                                  topology.host_of(call.root), true);
  // The leaders move the buffer while every other rank waits: on shared
  // cores they have all of the call's (the hosts' phases share them).
  CostModel leaders_model = model.at(LinkLevel::remote);
  leaders_model.available_cores = whole_call_cores(call, model);
  return cheapest_flat(leaders, leaders_model).seconds + slowest_host;
}

Plan hierarchical_broadcast_plan(const Call& call, const PlanTuning& tuning) {
  if (!hierarchical_broadcast_supports(call))
    throw InvalidArgument(cat("rank ", call.rank,
                              ": broadcast algorithm 'hierarchical' needs ranks on two or more hosts with some host "
                              "holding two or more"));
  ComposedPlan plan(true);
  if (call.count == 0) return std::move(plan).take();
  const Topology& topology = *call.topology;
  const int host = topology.host_of(call.rank);
  const std::vector<int> leaders = host_leaders(topology, call.root);
  const int leader = leaders[static_cast<size_t>(host)];

  if (call.rank == leader) {
    const Call phase = phase_call(call, Collective::broadcast, host, topology.hosts(), call.count,
                                  topology.host_of(call.root), true);
    const PhaseAlgorithm chosen =
        choose_phase_algorithm(phase, phase, LinkLevel::remote, tuning, "binomial",
                               tuning.cost_model ? whole_call_cores(call, *tuning.cost_model) : 0);
    plan.append(chosen.algorithm->build(phase, chosen.tuning), {.members = leaders, .slot_limit = phase_slot_span});
  }
  const std::vector<int>& local = topology.ranks_on(host);
  if (local.size() > 1) {
    const Call phase = phase_call(call, Collective::broadcast, topology.local_rank(call.rank),
                                  static_cast<int>(local.size()), call.count, topology.local_rank(leader), true);
    const PhaseAlgorithm chosen = choose_phase_algorithm(phase, phase, LinkLevel::local, tuning, "binomial");
    plan.append(chosen.algorithm->build(phase, chosen.tuning),
                {.members = local, .slot_base = phase_slot_span, .slot_limit = 2 * phase_slot_span});
  }
  return std::move(plan).take();
}

}  // namespace

constexpr AlgorithmFunctions hierarchical_broadcast{hierarchical_broadcast_supports, hierarchical_broadcast_cost,
                                                    hierarchical_broadcast_plan, hierarchical_tuning};

}  // namespace chorus::algorithms
