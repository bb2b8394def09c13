// What the public API does for device memory (any kind but host) before a
// collective runs: checks that the buffers are what the options say (memory
// of that device, not host or managed memory, not another device's) and
// orders the call against the caller's stream, through the kind's support
// (memory/registry.h). Internal.
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>

#include "chorus/collective_options.h"
#include "chorus/context.h"
#include "memory/kind_support.h"

namespace chorus::detail {

struct NamedBuffer {
  const char* name;  // "input", "output"
  const void* pointer;
};

// Null for host memory. Throws InvalidArgument naming the rank, the call and
// the buffer when a buffer is not memory of options.memory's device, or the
// process has no such device (or no support for the kind).
std::unique_ptr<StreamOrder> prepare_device_call(Context& context, std::string_view call,
                                                 const CollectiveOptions& options,
                                                 std::initializer_list<NamedBuffer> buffers, bool async);
// StreamOrder::inputs_ready, its TimeoutError naming `rank` and `call`.
void wait_for_inputs(StreamOrder& order, const Deadline& deadline, int rank, std::string_view call);
// The same checks of the buffers alone, for a call that moves them through
// buffers of its own (a grouped call's members). Nothing for host memory.
void check_device_buffers(Context& context, std::string_view call, const CollectiveOptions& options,
                          std::span<const NamedBuffer> buffers);

}  // namespace chorus::detail
