// Backends: libraries that run a whole collective themselves, on their own
// memory kind (NCCL on CUDA memory, backends/nccl/), chosen by name like an
// algorithm. A backend queues its work on the caller's stream and returns
// with the result in place, so the API neither orders it against that
// stream nor defers it to the async worker. The cost model knows nothing of
// a backend: it runs only when a call names it, never under "auto" or
// CHORUS_ALGO. Adding one means its folder here and one line of the table
// in registry.cc. This layer sits above the algorithms (a backend may run
// chorus's own collectives on subgroups, as NCCL's bootstrap does) and below
// the public API, which calls run_backend.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "algorithms/call.h"
#include "algorithms/communicator.h"
#include "base/deadline.h"

namespace chorus::backends {

using algorithms::Call;
using algorithms::Collective;
using algorithms::Communicator;

struct Backend {
  Collective collective;
  std::string_view name;
  // Runs the call on the Communicator, throwing InvalidArgument before any
  // data moves for a call it cannot serve. `sequence` is the call's number
  // on the Communicator, for whatever the backend must agree on with the
  // other members (NCCL: the groups of its bootstrap).
  void (*run)(const Communicator& communicator, const Call& call, const void* input, void* output,
              uint32_t sequence, Deadline deadline);
};

std::span<const Backend> all_backends();
// Null when no backend of that name exists for the collective.
const Backend* find_backend(Collective collective, std::string_view name);

// Runs the call on `backend` as it is: neither staged nor validated as a
// Plan would be (its memory is the backend's, not the transports',
// business). Marks the Communicator's position as a Plan's run does.
void run_backend(const Communicator& communicator, const Backend& backend, const Call& call, const void* input,
                 void* output, uint32_t sequence, Deadline deadline);

}  // namespace chorus::backends
