// A Plan of the table (registry.h) as a candidate of the one selection
// (candidate.h): it serves the calls its algorithm supports on memory the
// Communicator's transports move, costs what its formula predicts under the
// Communicator's model, and runs its prepared Plan on the Executor.
#pragma once

#include "algorithms/execution/candidate.h"
#include "algorithms/model/cost_model.h"
#include "algorithms/selection/registry.h"

namespace chorus::algorithms {

// Measured on the H100 with processes time-sliced on one GPU: each wait for
// the device (an IPC step, a chunked copy) costs about 150 us, and a message
// on device memory waits on both sides (the sender's copy out, the
// receiver's copy in) where one on host memory does not (staging.h).
inline constexpr double kDeviceMessageSeconds = 2 * 150e-6;

Candidate plan_candidate(const Algorithm& algorithm);

// The Communicator's model as a call on `memory` sees it (device memory's
// messages cost kDeviceMessageSeconds more).
CostModel cost_model_for(const Communicator& communicator, const Memory& memory);

}  // namespace chorus::algorithms
