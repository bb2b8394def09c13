// Collectives on CUDA memory over transports that move host memory only
// (tcp, shm, ibverbs without GPUDirect): the call runs on pinned host copies
// of the caller's buffers. What the plan reads is copied from the device
// first, the plan runs on host memory with the host kernels, and what it
// wrote is copied back.
//
// Layouts are kept: buffers that overlap (every in-place form, a block
// inside a big buffer) are staged as one range, so the host plan sees the
// same relation between input and output that the caller made.
//
// Whole buffers for now, one copy each way: at PCIe's ~55 GB/s against a
// network's 1-25 GB/s the copies cost a few percent at large sizes; the
// pipelined form (copy chunk k+1 while chunk k is on the wire) is the next
// step (docs/cuda.md).
#pragma once

#include <functional>

#include "algorithms/call.h"

namespace chorus::algorithms {

// Runs `run` with `call` moved to host memory and host copies of the buffers.
void run_staged(const Call& call, const void* input, void* output,
                const std::function<void(const Call& host_call, const void* input, void* output)>& run);

// Where each buffer of a staged call goes inside one staging buffer (host
// logic, tested without a GPU). Offsets are from the staging buffer's start.
struct StagingLayout {
  size_t bytes = 0;              // of the staging buffer
  size_t input_offset = 0;       // host copy of `input` (when input_bytes > 0)
  size_t output_offset = 0;      // host copy of `output` (when output_bytes > 0)
  // Copied in before the plan runs: a device range and its place in the buffer.
  struct Range {
    const std::byte* device = nullptr;
    size_t offset = 0;
    size_t bytes = 0;
  };
  Range copy_in;                 // bytes == 0: nothing
  Range copy_in_extra;           // broadcast root's output when disjoint from the input
  Range copy_out;                // the output range, copied back after
};
StagingLayout plan_staging(const Call& call, const void* input, const void* output);

}  // namespace chorus::algorithms
