// Where one call's tensors live: the CPU, or one CUDA device together with
// the caller's current stream on it. chorus orders device memory against
// that stream (docs/cuda.md): it reads the input after the work queued there
// before the call, and the stream waits for the result of an async call.
// What the Work later does on the device (copies back into non-contiguous or
// listed outputs, the Future's completion events) is queued on that same
// stream, so torch's caching allocator, which reuses a freed block in the
// order of the stream it was allocated on, never hands out memory that
// chorus or those copies still use.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include <optional>
#include <vector>

#include "adapters/torch/compat.h"
#include "chorus/collective_options.h"

namespace chorus::torch_backend {

struct Placement {
  c10::Device device{c10::kCPU};
  // CUDA only: the calling thread's current stream on `device`, taken at the call.
  std::optional<c10::Stream> stream;

  bool on_cuda() const { return device.is_cuda(); }
};

// Every tensor on the first one's device: tensors on two devices (CPU and
// CUDA, or two GPUs) are an InvalidArgument naming both.
void expect_one_device(const std::vector<at::Tensor>& tensors, const char* collective, int rank);

// The one device every tensor of a call is on (the CPU for a call without
// tensors), with its stream; expect_one_device's error otherwise.
Placement placement_of(const std::vector<at::Tensor>& tensors, const char* collective, int rank);

// The call's memory and stream in chorus's options.
void place(CollectiveOptions& options, const Placement& placement);

// For a CUDA call: the calling thread's current stream waits for the work
// queued so far on the call's stream (a Work's copies back, when wait() is
// called on another stream than the call was made on). Nothing for the CPU.
void order_current_stream_after(const Placement& placement);

}  // namespace chorus::torch_backend
