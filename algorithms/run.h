// Entry point of the algorithm layer for the public API: choose the
// candidate for the call (selection.h), build its Plan if it has one, run
// it on the Communicator with the bookkeeping every call shares.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "algorithms/model/call.h"
#include "algorithms/execution/communicator.h"
#include "base/deadline.h"

namespace chorus::algorithms {

struct Choice;
// A choice that run_collective made, held by a caller that will run the
// same call again (api/issue.cc): the next run takes it as it is, without
// the plan cache's lookup. A choice depends only on the call and on what the
// Communicator fixes for its lifetime (plan_cache.h), so it stays right.
using HeldChoice = std::shared_ptr<const Choice>;

// The checks the public API makes with its own words, for callers below it
// (the algorithm layer's tests): the call describes this communicator's
// rank, a collective it runs, memory its transports move (or stage) and
// buffers laid out as the call says. Throws InvalidArgument naming what is
// wrong. Returns the call completed as the public API completes it: the
// communicator's topology, and the in-place plan for an allreduce or reduce
// given the same buffer twice (an out-of-place plan reads the input after
// writing the output).
Call checked_call(const Communicator& communicator, Call call, const void* input, const void* output);

// Runs a call that the public API or checked_call built: its validity is
// asserted here, not checked again. input/output are the caller's buffers
// (broadcast uses output only; barrier neither). In place, they are laid out
// as the public API documents: input == output for allreduce/reduce; this
// rank's block inside the large buffer for allgather, gather (root), scatter
// (root) and reduce_scatter. `algorithm` is "auto" or a name; the
// communicator's CHORUS_ALGO overrides apply when it is "auto". Throws
// InvalidArgument for an unknown algorithm or one that cannot serve the call
// (listing valid names). On any failure of the run the Mesh is aborted
// before this returns, so no transport thread writes into the caller's
// buffers afterwards. `caller_waits`: a blocking call, whose whole run
// counts as time the caller spent waiting (Telemetry), without reading the
// clock twice more. `held`, where given: a choice made for this call and
// `algorithm` before on this communicator, run as it is; where it is null,
// the choice made now is left there.
void run_collective(const Communicator& communicator, const Call& call, const void* input, void* output,
                    const std::string& algorithm, uint32_t sequence, Deadline deadline, bool caller_waits = false,
                    HeldChoice* held = nullptr);

// Whether the candidate named `algorithm` runs at issue on the caller's
// stream (candidate.h: NCCL), so the API runs it now, neither queued nor
// stream-ordered by chorus.
bool runs_at_issue(Collective collective, std::string_view algorithm);

}  // namespace chorus::algorithms
