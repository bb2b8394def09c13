// Runs one rank's Plan on a Communicator: posts sends and receives on the Pairs
// (a send limit per peer), runs reduce/copy steps on the calling
// thread as soon as their inputs arrived (while the transport keeps moving
// the next bytes), and waits on one CompletionSignal for all its requests.
//
// Whatever happens, when execute returns or throws the transport no longer
// touches the caller's buffers or the scratch: on any error the Mesh is
// aborted (synchronously) first.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "algorithms/model/call.h"
#include "algorithms/execution/communicator.h"
#include "algorithms/model/plan.h"
#include "algorithms/model/schedule.h"
#include "algorithms/execution/telemetry.h"
#include "base/deadline.h"

namespace chorus::algorithms {

// input/output are the caller's buffers (equal for in place), in
// call.memory. `sequence` numbers the call on the Communicator and goes into
// every tag. On deadline: TimeoutError naming the oldest pending message; on
// a transport error: that error. Both after aborting the Mesh.
struct ExecuteExtras {
  SendLimit send_limit;
  // When given, one entry per step of the Plan: when it was posted or
  // started and when it finished (both zero if it never was).
  std::vector<StepTiming>* step_timings = nullptr;
  // When the caller started the collective, if it read the clock already
  // (a small collective should not read it twice).
  std::optional<Clock::time_point> started;
};
void execute(const Communicator& communicator, const Plan& plan, const PlanGraph& graph, const Call& call,
             const void* input, void* output, uint32_t sequence, Deadline deadline, const ExecuteExtras& extras = {});

// Convenience for one-off plans (derives the graph itself).
void execute(const Communicator& communicator, const Plan& plan, const Call& call, const void* input, void* output,
             uint32_t sequence, Deadline deadline);

}  // namespace chorus::algorithms
