// Large op outputs from blocks the process keeps, instead of fresh memory
// from TensorFlow's CPU allocator every call.
//
// Why: a TensorFlow op writes a new output tensor (tensors are immutable),
// and a 16 MiB block from the CPU allocator is fresh pages every call
// (glibc unmaps a freed block that large). Touching them costs a page fault
// per 4 KiB, as much as a third of a 16 MiB shared-memory allreduce. A
// training loop asks for the same sizes every step, so the block an earlier
// step's tensor gave back is the next output: no faults once warm.
// Below kPooledMinBytes the allocator's own free lists already do this.
#pragma once

#include <cstddef>

#include "tensorflow/core/framework/op_kernel.h"

namespace chorus::tensorflow_ops {

inline constexpr size_t kPooledMinBytes = size_t{1} << 20;
// What the pool keeps of blocks nobody holds; beyond it they are freed.
inline constexpr size_t kPoolKeepsBytes = size_t{512} << 20;

// Allocates output `index` of `shape` (the op's declared dtype): from the
// pool at kPooledMinBytes and above, from TensorFlow's allocator below.
absl::Status allocate_pooled_output(::tensorflow::OpKernelContext* context, int index,
                                    const ::tensorflow::TensorShape& shape, ::tensorflow::Tensor** output);

// Forwards input `input` to output `output` when TensorFlow lets it go (it
// then reduces in place), else allocate_pooled_output.
absl::Status forward_or_allocate_pooled(::tensorflow::OpKernelContext* context, int input, int output,
                                        const ::tensorflow::TensorShape& shape, ::tensorflow::Tensor** result);

}  // namespace chorus::tensorflow_ops
