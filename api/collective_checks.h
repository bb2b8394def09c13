// What every public collective checks before the algorithm layer sees a call:
// local argument checks (so a bad call fails on the rank that made it, with a
// message naming that rank and what was expected), and the abort that tells
// the other ranks why. Internal (not installed).
#pragma once

#include <cstddef>
#include <exception>
#include <span>

#include "algorithms/model/call.h"
#include "chorus/collective_options.h"
#include "chorus/context.h"
#include "base/error.h"
#include "base/types.h"
#include "chorus/work.h"

namespace chorus::detail {

algorithms::Call make_call(Context& context, algorithms::Collective collective, size_t count, DataType type,
                           ReduceOp op, int root, bool in_place);

void check_type(Context& context, const char* collective, DataType type);
void check_reduction(Context& context, const char* collective, DataType type, ReduceOp op);
// count elements of type fit in size_t bytes.
void check_bytes(Context& context, const char* collective, size_t count, DataType type);
void check_not_null(Context& context, const char* collective, const char* name, const void* buffer, size_t count);
void check_root(Context& context, const char* collective, int root);
// Buffers that overlap without being the collective's in-place layout would
// be read after being overwritten.
void check_overlap(Context& context, const char* collective, const void* input, size_t input_bytes,
                   const void* output, size_t output_bytes);
// The in-place layout of the block collectives (allgather, gather, scatter,
// reduce_scatter and their v variants): `block`, this rank's block of `call`,
// sits at this rank's offset inside `whole`, all the blocks. Returns whether
// it does; laid out any other way, the two buffers must not overlap.
bool block_in_place(Context& context, const char* collective, const algorithms::Call& call, const void* whole,
                    const void* block);
// The same for a call of fixed counts: every block holds `count` elements
// (checked_product first). A call of fixed counts needs no Call built
// (issue.h, CallShape).
bool fixed_block_in_place(Context& context, const char* collective, size_t count, DataType type, const void* whole,
                          const void* block);
// One count per rank; returns their sum after checking it fits in size_t bytes.
size_t check_counts(Context& context, const char* collective, const char* name, std::span<const size_t> counts,
                    DataType type);
// count * blocks elements, checked against overflow.
size_t checked_product(Context& context, const char* collective, size_t count, size_t blocks, DataType type);

// A call this rank rejects would leave the other ranks waiting inside the
// same collective until their timeout. Aborting the Context tells them at
// once, and why ("peer rank 2 aborted: rank 2: broadcast root 7 is out of
// range ..."); the Context is unusable afterwards either way.
void abort_for(Context& context, std::exception_ptr reason);

template <class Body>
Work aborting_on_invalid_argument(Context& context, Body&& body) {
  try {
    return body();
  } catch (const InvalidArgument&) {
    abort_for(context, std::current_exception());
    throw;
  }
}

}  // namespace chorus::detail
