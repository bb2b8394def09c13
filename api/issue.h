// Issuing a public collective: numbering the call and running it inline or
// on the Context's work queue, after its arguments were checked
// (api/collective_checks.h). Internal (not installed).
#pragma once

#include <functional>

#include "algorithms/model/call.h"
#include "chorus/collective_options.h"
#include "chorus/context.h"
#include "chorus/work.h"

namespace chorus::detail {

// Work around a call's run, on whichever thread runs it: `before` once the
// inputs are ready (after the caller's stream), `after` once the run
// succeeded, before the call counts as finished (an async call's Work too).
// A grouped call packs its members into one buffer before and unpacks them
// after. Calls with steps run on chorus's own algorithms: a backend orders
// itself on the caller's stream, where these host-side steps cannot follow.
struct RunSteps {
  std::function<void()> before;
  std::function<void()> after;
};

// Numbers the call and runs it (blocking) or queues it (async). `call` was
// checked by the caller, and is completed here with what the options and the
// Context fix (memory, topology), then carried down unchanged.
Work issue(Context& context, algorithms::Call call, const void* input, void* output,
           const CollectiveOptions& options, bool async, RunSteps steps = {});

// A call of fixed counts, as the public API knows it before it builds a Call.
struct CallShape {
  algorithms::Collective collective;
  size_t count;
  DataType type;
  ReduceOp op;
  int root;
  bool in_place;
};

// issue() for a call of fixed counts, which builds its Call only where the
// Context has not just run one of the same shape (ContextState::RepeatedCall).
Work issue(Context& context, const CallShape& shape, const void* input, void* output,
           const CollectiveOptions& options, bool async);

}  // namespace chorus::detail
