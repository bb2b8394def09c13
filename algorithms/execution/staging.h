// Collectives on device memory (any kind but host: memory/registry.h) over
// transports that move host memory only (tcp, shm, ibverbs without
// GPUDirect): the call runs on pinned host copies
// of the caller's buffers. What the plan reads is copied from the device
// first, the plan runs on host memory with the host kernels, and what it
// wrote is copied back.
//
// Layouts are kept: buffers that overlap (every in-place form, a block
// inside a big buffer) are staged as one range, so the host plan sees the
// same relation between input and output that the caller made.
//
// When: wherever a transport of the collective cannot move device memory,
// and for small collectives always. A small one staged whole costs one copy
// each way; run on the device, each of its messages costs device round
// trips of its own (a chunked copy through the transport's staging, or an
// IPC step between processes that share a GPU by time-slicing, ~150 µs
// each, measured). Larger collectives run their Plan on the device:
// reductions in device kernels, messages over a transport that moves the
// kind itself or pipelined through pinned chunks
// (transport/host_staging/host_staging.h).
//
// Every rank must decide alike, or one would send device messages where
// another expects host ones: the decision reads only what all ranks share
// (the call's size, and which ranks move device memory, agreed at connect).
#pragma once

#include <functional>

#include "algorithms/model/call.h"
#include "algorithms/execution/candidate.h"
#include "algorithms/execution/communicator.h"

namespace chorus::algorithms {

// Collectives smaller than this (the call's size as every rank sees it)
// are staged whole. A first guess: the GPU machine is to tune it (docs/memory.md).
inline constexpr size_t kDevicePlanMinBytes = size_t{256} << 10;

// Processes that take turns of one device (MemoryKindSupport::
// time_sliced_device), measured on the H200 (2026-12-04, copy_latency.cu
// and chorus-bench): a copy to the device under 32 KiB waited for the
// process's turn, about 180 us per other process with work queued; from
// 32 KiB it took 14-31 us. A staged allreduce then took 500-540 us under
// 32 KiB at 4 processes (175-220 at 2), 54 at 32 KiB and 115 at 128 KiB
// (40 and 79 at 2): the copies on top of the plain model, per other member.
inline constexpr size_t kTimeSlicedPromptUploadBytes = size_t{32} << 10;
inline constexpr double kTimeSlicedTurnSeconds = 175e-6;
inline constexpr double kTimeSlicedCopySeconds = 7e-6;
inline constexpr double kTimeSlicedCopySecondsPerByte = 0.17e-9;

// Whether a call on device memory runs staged whole.
bool runs_staged(const Communicator& communicator, const Call& call);

// Staging as a wrapper candidate (candidate.h), named "staged": serves the
// calls runs_staged names, costs the copies both ways on top of the inner
// candidate, which runs the call on host memory (the board included).
inline constexpr std::string_view kStaged = "staged";
const Candidate& staging_candidate();

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
