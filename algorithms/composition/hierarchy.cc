// Leaders, phase calls and the per-phase choice of flat algorithms.
#include "algorithms/composition/hierarchy.h"

#include "algorithms/plans/flat_plans.h"

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

bool has_two_levels(const Call& call) {
  return call.topology && call.topology->size() == call.size && call.topology->hosts() >= 2 &&
         call.topology->hosts() < call.size;
}

Call phase_call(const Call& parent, Collective collective, int rank, int size, size_t count, int root,
                bool in_place) {
  Call call = make_call(collective, rank, size, count, parent.type, parent.op, root, in_place);
  call.memory = parent.memory;
  call.previous_root = parent.previous_root;
  return call;
}

std::vector<int> host_leaders(const Topology& topology, int root) {
  std::vector<int> leaders;
  for (int host = 0; host < topology.hosts(); ++host) leaders.push_back(topology.ranks_on(host).front());
  if (root >= 0 && root < topology.size()) leaders[static_cast<size_t>(topology.host_of(root))] = root;
  return leaders;
}

PhaseCost cheapest_flat(const Call& phase, const CostModel& level_model) {
  // A phase call has no topology, so no hierarchical algorithm supports it.
  const Algorithm* best = cheapest_flat_plan(phase, level_model);
  if (!best)
    throw InvalidArgument(cat("rank ", phase.rank, ": no flat ", to_string(phase.collective),
                              " algorithm for a phase of ", phase.size, " ranks"));
  return PhaseCost{best, best->cost_seconds(phase, level_model)};
}

double whole_call_cores(const Call& call, const CostModel& model) {
  return model.shares_cores() ? call.size * model.cores_per_rank : 0;
}

PhaseAlgorithm choose_phase_algorithm(const Call& phase, const Call& choose_by, LinkLevel level,
                                      const PlanTuning& parent, std::string_view fallback,
                                      double available_cores) {
  PlanTuning inherited;
  inherited.segment_bytes = parent.segment_bytes;
  inherited.scratch_segments = parent.scratch_segments;
  if (!parent.cost_model) {
    const Algorithm* algorithm = find_flat_plan(phase.collective, fallback);
    if (!algorithm || !algorithm->supports(phase))
      throw InvalidArgument(cat("rank ", phase.rank, ": ", to_string(phase.collective), " algorithm '", fallback,
                                "' cannot run a phase of ", phase.size, " ranks"));
    return {algorithm, inherited};
  }
  CostModel level_model = parent.cost_model->at(level);
  level_model.available_cores = available_cores;
  const Algorithm* algorithm = cheapest_flat(choose_by, level_model).algorithm;
  if (!algorithm->supports(phase)) algorithm = cheapest_flat(phase, level_model).algorithm;
  return {algorithm, algorithm->tuned_by_model() ? plan_tuning(*algorithm, phase, level_model) : inherited};
}

PlanTuning hierarchical_tuning(const Call&, const CostModel& model) {
  PlanTuning tuning;
  tuning.cost_model = model;
  return tuning;
}

}  // namespace chorus::algorithms
