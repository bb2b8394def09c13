// Runs one rank's Plan on a Context: posts sends and receives on the Pairs
// (a window per peer and direction), runs reduce/copy steps on the calling
// thread as soon as their inputs arrived (while the transport keeps moving
// the next bytes), and waits on one CompletionSignal for all its requests.
//
// Whatever happens, when execute returns or throws the transport no longer
// touches the caller's buffers or the scratch: on any error the Device is
// aborted (synchronously) first.
#pragma once

#include <cstdint>

#include "algorithms/call.h"
#include "algorithms/plan.h"
#include "algorithms/schedule.h"
#include "chorus/context.h"
#include "base/deadline.h"

namespace chorus::algorithms {

// input/output are the caller's buffers (equal for in place). `sequence`
// numbers the call on the Context and goes into every tag. On deadline:
// TimeoutError naming the oldest pending message; on a transport error: that
// error. Both after aborting the Device.
void execute(Context& context, const Plan& plan, const PlanGraph& graph, const Call& call, const void* input,
             void* output, uint32_t sequence, Deadline deadline, Window window = {});

// Convenience for one-off plans (derives the graph itself).
void execute(Context& context, const Plan& plan, const Call& call, const void* input, void* output,
             uint32_t sequence, Deadline deadline);

}  // namespace chorus::algorithms
