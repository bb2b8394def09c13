// The options every collective and point-to-point call takes, shared by the
// headers of the public API.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "base/memory.h"
#include "chorus/context.h"

namespace chorus {

struct CollectiveOptions {
  // "auto" or an algorithm name ("ring", "binomial", ...); CHORUS_ALGO
  // (e.g. "allreduce:ring,broadcast:binomial") overrides "auto".
  std::string algorithm = "auto";
  // Defaults to the Context's timeout.
  std::optional<std::chrono::milliseconds> timeout;
  // Where the buffers of the raw-pointer forms live: host memory, or the
  // memory of one CUDA device (Memory::cuda(n); memory_of() tells which a
  // pointer is). Device buffers move over any transport (through pinned
  // host memory where the transport moves host memory only) and reduce on
  // the device (docs/cuda.md).
  Memory memory = Memory::host();
  // CUDA memory only: the caller's cudaStream_t (null: the legacy default
  // stream). The collective reads its input after the work queued there
  // before the call, and work queued there after the call runs after the
  // result is in place, for async calls too, without blocking the host.
  void* cuda_stream = nullptr;
  // Async calls on CUDA memory only. true: work queued on cuda_stream after
  // the call waits for its result, from the issue on (a flag the stream
  // waits on). false: nothing is queued on the caller's stream; its work
  // sees the result once Work::wait() has returned. That is NCCL's and
  // torch.distributed's contract, which chorus.torch keeps.
  bool cuda_stream_waits_for_async = true;
};

// Where a buffer lives: Memory::cuda(n) for memory of CUDA device n, host
// memory otherwise (and always in a build or process without CUDA). Throws
// InvalidArgument for CUDA managed memory, which chorus does not move.
Memory memory_of(const void* pointer);

// Throws InvalidArgument for typed calls whose input and output sizes differ.
[[noreturn]] void throw_size_mismatch(Context& context, const char* collective, size_t input_count,
                                      size_t output_count);

// Throws InvalidArgument (and aborts the Context, like every rejected call)
// for typed calls whose span sizes do not fit the collective. `what` says
// what was expected ("allgather output of 4 blocks of 3 elements (12) but got 10").
[[noreturn]] void throw_bad_span(Context& context, const char* collective, const std::string& what);

// Checks of the typed overloads; each failure goes through throw_bad_span.
namespace detail {
// The block of a buffer holding size() equal blocks.
size_t block_of(Context& context, const char* collective, size_t total);
// `actual` elements are size() blocks of `block`.
void expect_blocks(Context& context, const char* collective, const char* name, size_t block, size_t actual);
void expect_elements(Context& context, const char* collective, const char* name, size_t expected, size_t actual);
// One count per rank (else InvalidArgument); their sum / this rank's entry / its offset.
size_t sum_of_counts(Context& context, const char* collective, std::span<const size_t> counts);
size_t count_of_rank(Context& context, const char* collective, std::span<const size_t> counts);
size_t block_offset_of_rank(Context& context, std::span<const size_t> counts);
}  // namespace detail

}  // namespace chorus
