// Entry point of the algorithm layer for the public API: select an algorithm
// for the call, build its Plan, run it on the Communicator; or, for a
// backend named by the call (registry.h), hand the call to it.
#pragma once

#include <cstdint>
#include <string>

#include "algorithms/call.h"
#include "algorithms/communicator.h"
#include "base/deadline.h"

namespace chorus::algorithms {

// input/output are the caller's buffers (broadcast uses output only; barrier
// neither). In place, they are laid out as the public API documents:
// input == output for allreduce/reduce; this rank's block inside the large
// buffer for allgather, gather (root), scatter (root) and reduce_scatter. `algorithm` is "auto" or a
// name (a Plan's or a backend's); the communicator's CHORUS_ALGO overrides
// apply when it is "auto".
// Throws InvalidArgument for an unknown algorithm or one that cannot serve
// the call (listing valid names), or for memory a transport cannot move.
// On any failure of the run the Mesh is aborted before this returns, so no
// transport thread writes into the caller's buffers afterwards.
// `caller_waits`: a blocking call, whose whole run counts as time the
// caller spent waiting (Telemetry), without reading the clock twice more.
void run_collective(const Communicator& communicator, const Call& call, const void* input, void* output,
                    const std::string& algorithm, uint32_t sequence, Deadline deadline, bool caller_waits = false);

}  // namespace chorus::algorithms
