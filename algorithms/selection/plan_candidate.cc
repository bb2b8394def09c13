// Plans as candidates (plan_candidate.h).
#include "algorithms/selection/plan_candidate.h"

#include "algorithms/execution/communicator.h"
#include "algorithms/execution/executor.h"
#include "algorithms/execution/local_steps.h"
#include "algorithms/execution/plan_cache.h"
#include "algorithms/execution/staging.h"
#include "memory/registry.h"

namespace chorus::algorithms {
namespace {

bool plan_serves(const Candidate& self, const Communicator& communicator, const Call& call) {
  // Reduce-scatter Plans read this rank's input block until their last
  // step, so none reduces into it in place: the in-place copy serves those.
  if (call.collective == Collective::reduce_scatter && call.in_place) return false;
  // Device memory no transport moves, or a small call on it: staged whole.
  if (!communicator.accepts(call.memory) || runs_staged(communicator, call)) return false;
  return self.plan->supports(call);
}

double plan_cost(const Candidate& self, const Communicator& communicator, const Call& call) {
  return self.plan->cost_seconds(call, cost_model_for(communicator, call.memory));
}

Moved plan_run(const Candidate&, const CandidateRun& run) {
  const PreparedPlan& prepared = *run.choice.prepared;
  ExecuteExtras extras;
  extras.step_timings = run.step_timings;
  extras.started = run.started;
  execute(run.communicator, prepared.plan, prepared.graph, run.call, run.input, run.output, run.sequence,
          run.deadline, extras);
  // What the Plan leaves to the end (an average's division).
  finish_collective(run.call, run.output, memory_backend(run.call.memory));
  return {prepared.bytes_sent, prepared.bytes_received};
}

}  // namespace

CostModel cost_model_for(const Communicator& communicator, const Memory& memory) {
  CostModel model = communicator.cost_model();
  if (memory.on_host()) return model;
  model.alpha_seconds += kDeviceMessageSeconds;
  model.local.alpha_seconds += kDeviceMessageSeconds;
  model.remote.alpha_seconds += kDeviceMessageSeconds;
  return model;
}

Candidate plan_candidate(const Algorithm& algorithm) {
  return Candidate{.name = algorithm.name,
                   .collective = algorithm.collective,
                   .role = CandidateRole::runs,
                   .plan = &algorithm,
                   .serves = plan_serves,
                   .cost_seconds = plan_cost,
                   .run = plan_run};
}

}  // namespace chorus::algorithms
