// Helper collectives on the Executor (helper_plan.h).
#include "algorithms/execution/helper_plan.h"

#include "algorithms/execution/executor.h"
#include "algorithms/execution/local_steps.h"
#include "algorithms/plans/flat_plans.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/registry.h"

namespace chorus::algorithms {

void run_helper_collective(const Communicator& helpers, Call call, const void* input, void* output,
                           std::string_view plan, uint32_t sequence, Deadline deadline) {
  if (!call.topology) call.topology = helpers.shared_topology();
  const CostModel& model = helpers.cost_model();
  const Algorithm* algorithm = plan == "auto" ? cheapest_flat_plan(call, model) : find_flat_plan(call.collective, plan);
  if (!algorithm || !algorithm->supports(call))
    throw InvalidArgument(cat("rank ", helpers.rank(), ": no flat ", to_string(call.collective), " Plan '", plan,
                              "' for a helper call of ", call.size, " ranks"));
  const Plan built = algorithm->build(call, plan_tuning(*algorithm, call, model));
  helpers.note_started(sequence);
  struct Finished {
    const Communicator& helpers;
    uint32_t sequence;
    ~Finished() { helpers.note_finished(sequence); }
  } finished{helpers, sequence};
  execute(helpers, built, call, input, output, sequence, deadline);
  finish_collective(call, output, memory_backend(call.memory));
}

}  // namespace chorus::algorithms
