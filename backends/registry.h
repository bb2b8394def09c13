// Backends: libraries that run a whole collective themselves, on their own
// memory kind (NCCL on CUDA memory, backends/nccl/), offered to the one
// selection as candidates (algorithms/execution/candidate.h). A backend queues its
// work on the caller's stream and returns with the result in place, so
// the API neither orders it against that stream nor defers it to the
// async worker (Candidate::runs_at_issue). Its cost is unknown to the
// model until a machine with a GPU per rank measures it, so it runs only
// when a call or CHORUS_ALGO names it. Adding one means its folder here
// and one line of the table in registry.cc. This layer sits above the
// algorithms (a backend may run chorus's own collectives on subgroups, as
// NCCL's bootstrap does) and below the public API, which registers the
// table (register_backends) before its first Context connects.
#pragma once

#include <span>

#include "algorithms/model/call.h"
#include "algorithms/execution/candidate.h"
#include "algorithms/execution/communicator.h"

namespace chorus::backends {

using algorithms::Call;
using algorithms::Collective;
using algorithms::Communicator;

std::span<const algorithms::Candidate> backend_candidates();
// Adds backend_candidates() to the one registry; once per process is enough.
void register_backends();

}  // namespace chorus::backends
