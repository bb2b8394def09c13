// Tensors as chorus buffers: which chorus type and op a torch dtype and
// ReduceOp map to, and the checks every call makes before anything moves
// (dense CPU or CUDA tensors, one tensor per call, matching shapes). A
// failed check throws chorus::InvalidArgument naming this rank and what was
// expected, and leaves the group usable: chorus itself would finish the
// Context on a bad call.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "adapters/torch/compat.h"
#include "base/types.h"

namespace chorus::torch_backend {

// A tensor's elements as chorus sees them.
struct Elements {
  DataType type;
  size_t count;
};

// For reductions: the dtypes chorus reduces (float32/64, float16, bfloat16,
// int8, uint8, int32, int64); others are an error naming the dtype.
Elements reduction_elements(const at::Tensor& tensor, const char* collective, int rank);
// For collectives that only move data: any dtype, moved as its bytes where
// chorus has no type of its own (bool, int16, complex).
Elements movement_elements(const at::Tensor& tensor);

// The chorus op for torch's; PREMUL_SUM, which chorus has none for, is an
// error. Whether the op applies to the call's type (bitwise ops need
// integers) is the API's rule: the collective checks it.
ReduceOp chorus_op_of(const c10d::ReduceOp& op, const char* collective, int rank);

// A dense tensor on the CPU or, with torch 2.3 or later, on a CUDA device
// (chorus moves and reduces device memory itself, never through a silent
// copy here). That all of a call's tensors share one device is checked
// when its Work is made (placement.h).
void expect_dense(const at::Tensor& tensor, const char* collective, int rank);
// Exactly one tensor per call (torch's lists are one per device).
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* collective, const char* what, int rank);
void expect_same_layout(const at::Tensor& tensor, const at::Tensor& reference, const char* collective,
                        const char* what, int rank);

// Whether the bytes of two (contiguous) tensors overlap. chorus takes
// overlapping input and output only in a collective's in-place layout and
// finishes the Context over any other; such inputs are cloned first.
bool overlaps(const at::Tensor& a, const at::Tensor& b);

// Buffers a call hands chorus, and what to do once it finished. A
// non-contiguous tensor is copied into a contiguous one for the call and
// (for outputs) copied back after it: correct for any strides, at the cost
// of a copy that contiguous tensors never pay.
class Staging {
 public:
  // For a buffer chorus only reads.
  at::Tensor input(const at::Tensor& tensor);
  // For a buffer chorus writes (and may read first: in place).
  at::Tensor output(const at::Tensor& tensor);
  // Holds a buffer until the call finished.
  void keep(const at::Tensor& tensor) { kept_.push_back(tensor); }
  // Runs after a successful call, in order (copies out of flat buffers).
  void after(std::function<void()> step) { after_.push_back(std::move(step)); }

  // Copies back and runs the after-steps; then drops every buffer.
  void finish();
  void drop();

 private:
  std::vector<at::Tensor> kept_;
  std::vector<std::function<void()>> after_;
};

}  // namespace chorus::torch_backend
