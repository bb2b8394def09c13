// A collective of the algorithm layer's own, on a helper group made for
// one call (the board's set-up, the mapped allreduce's barriers): a flat
// Plan run straight on the Executor, without the selection above (which
// knows the candidates these helpers belong to) and without the
// application's counters and trace. Its position is noted as any call's,
// so a helper that stalls is reported with who has arrived.
#pragma once

#include <cstdint>
#include <string_view>

#include "algorithms/execution/communicator.h"
#include "algorithms/model/call.h"
#include "base/deadline.h"

namespace chorus::algorithms {

// Runs `call` (whose topology may be unset) with the flat Plan named
// `plan`, or with the cheapest flat Plan under the group's cost model
// ("auto"). Throws InvalidArgument where no such Plan serves the call.
void run_helper_collective(const Communicator& helpers, Call call, const void* input, void* output,
                           std::string_view plan, uint32_t sequence, Deadline deadline);

}  // namespace chorus::algorithms
