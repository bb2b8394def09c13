// Element-wise reduction kernels for every (DataType, ReduceOp) pair.
// Internal to the library (not installed).
#pragma once

#include <cstddef>

#include "base/types.h"

namespace chorus {

// accumulator[i] = accumulator[i] op operand[i] for i < count.
// ReduceOp::avg reduces as sum; finish_average divides at the end.
// Callers validate the pair first (validate_reduction); an invalid pair here
// throws InvalidArgument.
void reduce_into(DataType type, ReduceOp op, void* accumulator, const void* operand, size_t count);

// Divides each element by `contributors` (integers truncate toward zero;
// float16/bfloat16 round to nearest even).
void finish_average(DataType type, void* data, size_t count, size_t contributors);

// The same kernels without the argument checks, for callers that made them
// once for a whole call (the executor's reduce steps: the public API or
// algorithms::checked_call checked the call's type, op and buffers, and the
// Plan's regions never overlap partially). Asserted, not checked.
void reduce_unchecked(DataType type, ReduceOp op, void* accumulator, const void* operand, size_t count);
void average_unchecked(DataType type, void* data, size_t count, size_t contributors);

// output[i] = first[i] op second[i], unchecked as reduce_unchecked: what
// copying `first` into `output` and reducing `second` into it gives, bit
// for bit (the same operands in the same order), in one pass where the
// three buffers are aligned for the type and `output` is neither operand.
// Saves a pass over `output` where a reduction starts from a buffer it must
// not write (the board's allreduce starts from the caller's input).
// `output` may be `first`; it must not overlap either operand otherwise
// (nor be `second`).
void reduce_pair_unchecked(DataType type, ReduceOp op, void* output, const void* first, const void* second,
                           size_t count);

}  // namespace chorus
