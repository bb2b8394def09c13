// A collective of the algorithm layer's own, on a helper group made for
// one call (the board's set-up, the mapped allreduce's barriers): a flat
// Plan run straight on the Executor, without the selection above (which
// knows the candidates these helpers belong to) and without the
// application's counters and trace. Its position is noted as any call's,
// so a helper that stalls is reported with who has arrived.
//
// A helper group that lives as long as its Context (a host board's rail,
// which carries every small call across hosts) repeats the same few calls:
// their Plans are kept in the group's own PlanCache, under keys no
// selection asks for, so a repeated helper call builds no Plan and derives
// no graph. A group made for one call starts with an empty cache.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "algorithms/execution/communicator.h"
#include "algorithms/model/algorithm.h"
#include "algorithms/model/call.h"
#include "base/deadline.h"

namespace chorus::algorithms {

// Runs `call` (whose topology may be unset) with the flat Plan named
// `plan`, or with the cheapest flat Plan under the group's cost model
// ("auto"). Throws InvalidArgument where no such Plan serves the call.
void run_helper_collective(const Communicator& helpers, Call call, const void* input, void* output,
                           std::string_view plan, uint32_t sequence, Deadline deadline);

// As above, with the Plan `choose` returns for a call the group has not run
// before, kept under `plan` (a name for that choice, which no other helper
// call of the group uses for another): a caller that prices its own Plan
// (a rail, by the load of all its host's rails) prices it once per shape.
using HelperPlanChoice = std::function<const Algorithm*(const Call&)>;
void run_helper_collective(const Communicator& helpers, Call call, const void* input, void* output,
                           std::string_view plan, const HelperPlanChoice& choose, uint32_t sequence,
                           Deadline deadline);

}  // namespace chorus::algorithms
