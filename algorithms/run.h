// Entry point of the algorithm layer for the public API: select an algorithm
// for the call, build its Plan, run it on the Context.
#pragma once

#include <cstdint>
#include <string>

#include "algorithms/call.h"
#include "chorus/context.h"
#include "base/deadline.h"

namespace chorus::algorithms {

// input/output are the caller's buffers (broadcast uses output only; barrier
// neither). In place, they are laid out as the public API documents:
// input == output for allreduce/reduce; this rank's block inside the large
// buffer for allgather, gather (root), scatter (root) and reduce_scatter. `algorithm` is "auto" or a
// name; CHORUS_ALGO applies when it is "auto". Throws InvalidArgument for an
// unknown algorithm or one that cannot serve the call (listing valid names).
// On any failure the Context's device is aborted before this returns, so no
// transport thread writes into the caller's buffers afterwards.
void run_collective(Context& context, const Call& call, const void* input, void* output,
                    const std::string& algorithm, uint32_t sequence, Deadline deadline);

}  // namespace chorus::algorithms
