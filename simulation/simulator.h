// Runs the Plans of every rank of a job in one thread, without sockets: for
// exhaustive correctness tests over many rank counts and for cost projections
// at scales no test machine has.
//
// It follows the Executor's rules (the same StepScheduler, the same
// reduce/copy code) and is stricter than a real run: a message is copied out
// of the sender's buffer only when the receiver takes it, any step touching a
// region that an in-flight send or recv uses is reported as a race (a missing
// dependency), messages must be received in the order they were sent on each
// (sender, receiver) pair, lengths must match, and a state where no step can
// run but some remain is reported as a deadlock.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/model/call.h"
#include "algorithms/model/cost_model.h"
#include "algorithms/model/plan.h"
#include "algorithms/model/schedule.h"

namespace chorus::algorithms {

struct RankBuffers {
  const void* input = nullptr;  // ignored for in-place calls
  void* output = nullptr;
};

struct SimulationOptions {
  SendLimit send_limit;
  CostModel cost;
};

struct RankReport {
  size_t steps = 0;
  size_t messages_sent = 0;
  size_t bytes_sent = 0;
  // When this rank's last step finishes under the alpha-beta-gamma model
  // (a rank reduces one thing at a time; a link carries one message at a time
  // in each direction).
  double finish_seconds = 0;
};

struct SimulationReport {
  std::vector<RankReport> ranks;
  double critical_path_seconds = 0;  // the slowest rank
};

// plans[r] and buffers[r] belong to rank r; call.rank is replaced by r. Also
// applies the collective's final touch (averaging), as run_collective does.
// Throws chorus::Error describing the deadlock, race or mismatch it found.
SimulationReport simulate(const std::vector<Plan>& plans, const std::vector<RankBuffers>& buffers, const Call& call,
                          const SimulationOptions& options = {});
// The same with one Call per rank, for calls whose ranks legitimately differ
// (alltoallv: each rank's own send and receive counts).
SimulationReport simulate(const std::vector<Plan>& plans, const std::vector<RankBuffers>& buffers,
                          const std::vector<Call>& calls, const SimulationOptions& options = {});

}  // namespace chorus::algorithms
