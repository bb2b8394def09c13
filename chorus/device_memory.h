// What the public API does for CUDA memory before a collective runs: checks
// that the buffers are what the options say (memory of that device, not
// host or managed memory, not another device's) and orders the call against
// the caller's stream (base/cuda/runtime.h). Internal.
#pragma once

#include <initializer_list>
#include <memory>
#include <string_view>
#include <utility>

#include "base/cuda/runtime.h"
#include "chorus/collective_options.h"
#include "chorus/context.h"

namespace chorus::detail {

struct NamedBuffer {
  const char* name;  // "input", "output"
  const void* pointer;
};

// Null for host memory. Throws InvalidArgument naming the rank, the call and
// the buffer when a buffer is not memory of options.memory's device, or the
// process has no such device (or no CUDA support).
std::unique_ptr<cuda::StreamOrder> prepare_device_call(Context& context, std::string_view call,
                                                       const CollectiveOptions& options,
                                                       std::initializer_list<NamedBuffer> buffers, bool async);

}  // namespace chorus::detail
