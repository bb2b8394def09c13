// Issuing a public collective: numbering the call and running it inline or
// on the Context's work queue, after its arguments were checked
// (chorus/collective_checks.h). Internal (not installed).
#pragma once

#include "algorithms/call.h"
#include "chorus/collective_options.h"
#include "chorus/context.h"
#include "chorus/work.h"

namespace chorus::detail {

// Numbers the call and runs it (blocking) or queues it (async). `call` was
// checked by the caller, and is completed here with what the options and the
// Context fix (memory, topology), then carried down unchanged.
Work issue(Context& context, algorithms::Call call, const void* input, void* output,
           const CollectiveOptions& options, bool async);

}  // namespace chorus::detail
