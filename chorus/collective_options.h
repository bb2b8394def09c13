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
  // Where the buffers of the raw-pointer forms live. Host memory is all this
  // build moves; CUDA device memory comes with the GPU transports.
  Memory memory = Memory::host();
};

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
