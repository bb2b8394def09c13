// Helper collectives on the Executor (helper_plan.h).
#include "algorithms/execution/helper_plan.h"

#include <memory>
#include <string>

#include "algorithms/execution/candidate.h"
#include "algorithms/execution/executor.h"
#include "algorithms/execution/plan_cache.h"
#include "algorithms/execution/local_steps.h"
#include "algorithms/plans/flat_plans.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/registry.h"

namespace chorus::algorithms {

namespace {

// The PlanCache key of a helper call's Plan: the name asked for behind a
// byte no candidate's name holds.
const std::string& helper_key(std::string_view plan) {
  thread_local std::string key;
  key.assign(1, '\x01');
  key.append(plan);
  return key;
}

std::shared_ptr<const Choice> build_helper_plan(const Communicator& helpers, const Call& call, std::string_view plan,
                                                const HelperPlanChoice& choose) {
  const Algorithm* algorithm = choose(call);
  if (!algorithm || !algorithm->supports(call))
    throw InvalidArgument(cat("rank ", helpers.rank(), ": no flat ", to_string(call.collective), " Plan '", plan,
                              "' for a helper call of ", call.size, " ranks"));
  auto choice = std::make_shared<Choice>();
  choice->prepared =
      std::make_shared<const PreparedPlan>(algorithm->build(call, plan_tuning(*algorithm, call, helpers.cost_model())));
  return choice;
}

}  // namespace

void run_helper_collective(const Communicator& helpers, Call call, const void* input, void* output,
                           std::string_view plan, uint32_t sequence, Deadline deadline) {
  const HelperPlanChoice by_name = [&](const Call& shape) {
    return plan == "auto" ? cheapest_flat_plan(shape, helpers.cost_model()) : find_flat_plan(shape.collective, plan);
  };
  run_helper_collective(helpers, std::move(call), input, output, plan, by_name, sequence, deadline);
}

void run_helper_collective(const Communicator& helpers, Call call, const void* input, void* output,
                           std::string_view plan, const HelperPlanChoice& choose, uint32_t sequence,
                           Deadline deadline) {
  if (!call.topology) call.topology = helpers.shared_topology();
  std::shared_ptr<const Choice> choice = helpers.plan_cache().find(call, helper_key(plan), /*remember=*/false);
  if (!choice) {
    choice = build_helper_plan(helpers, call, plan, choose);
    helpers.plan_cache().add(call, helper_key(plan), choice);
  }
  helpers.note_started(sequence);
  struct Finished {
    const Communicator& helpers;
    uint32_t sequence;
    ~Finished() { helpers.note_finished(sequence); }
  } finished{helpers, sequence};
  const PreparedPlan& prepared = *choice->prepared;
  execute(helpers, prepared.plan, prepared.graph, call, input, output, sequence, deadline);
  finish_collective(call, output, memory_backend(call.memory));
}

}  // namespace chorus::algorithms
