#include "adapters/torch/tensors.h"

#include <cstddef>
#include <string>

#include "base/error.h"
#include "base/log.h"

namespace chorus::torch_backend {

namespace {

std::optional<DataType> reducible_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return DataType::float32;
    case at::kDouble: return DataType::float64;
    case at::kHalf: return DataType::float16;
    case at::kBFloat16: return DataType::bfloat16;
    case at::kChar: return DataType::int8;
    case at::kByte: return DataType::uint8;
    case at::kInt: return DataType::int32;
    case at::kLong: return DataType::int64;
    default: return std::nullopt;
  }
}

size_t element_count(const at::Tensor& tensor) { return static_cast<size_t>(tensor.numel()); }

}  // namespace

Elements reduction_elements(const at::Tensor& tensor, const char* collective, int rank) {
  const std::optional<DataType> type = reducible_type(tensor.scalar_type());
  if (!type) {
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": cannot reduce dtype ",
                              c10::toString(tensor.scalar_type()),
                              "; expected float32, float64, float16, bfloat16, int8, uint8, int32 or int64"));
  }
  return {*type, element_count(tensor)};
}

Elements movement_elements(const at::Tensor& tensor) {
  if (const std::optional<DataType> type = reducible_type(tensor.scalar_type())) return {*type, element_count(tensor)};
  return {DataType::uint8, element_count(tensor) * static_cast<size_t>(tensor.element_size())};
}

ReduceOp chorus_op_of(const c10d::ReduceOp& op, const char* collective, int rank) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM: return ReduceOp::sum;
    case c10d::ReduceOp::AVG: return ReduceOp::avg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::prod;
    case c10d::ReduceOp::MIN: return ReduceOp::min;
    case c10d::ReduceOp::MAX: return ReduceOp::max;
    case c10d::ReduceOp::BAND: return ReduceOp::band;
    case c10d::ReduceOp::BOR: return ReduceOp::bor;
    case c10d::ReduceOp::BXOR: return ReduceOp::bxor;
    default:
      throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": reduce op ",
                                static_cast<int>(op.op_),
                                " is not supported (PREMUL_SUM is NCCL's); expected SUM, AVG, PRODUCT, MIN, MAX, "
                                "BAND, BOR or BXOR"));
  }
}

void expect_dense(const at::Tensor& tensor, const char* collective, int rank) {
  if (tensor.is_sparse()) {
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": sparse tensors are not supported"));
  }
  if (tensor.device().is_cpu()) return;
  if (tensor.is_cuda()) {
    if (CHORUS_TORCH_CUDA_TENSORS) return;
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": got a tensor on ", tensor.device().str(),
                              ", but this chorus.torch was built against torch ", TORCH_VERSION,
                              ", which has no c10::Stream::native_handle() to hand chorus the caller's CUDA ",
                              "stream; expected a CPU tensor (CUDA tensors need chorus.torch built for torch 2.3 or ",
                              "later)"));
  }
  throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": expected a CPU or CUDA tensor, got one on ",
                            tensor.device().str()));
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* collective, const char* what, int rank) {
  if (tensors.size() != 1) {
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": expected exactly one ", what,
                              " tensor (one tensor per call), got ", tensors.size()));
  }
  expect_dense(tensors[0], collective, rank);
  return tensors[0];
}

void expect_same_layout(const at::Tensor& tensor, const at::Tensor& reference, const char* collective,
                        const char* what, int rank) {
  expect_dense(tensor, collective, rank);
  if (tensor.scalar_type() != reference.scalar_type() || tensor.numel() != reference.numel()) {
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": ", what, " has ", tensor.numel(),
                              " elements of ", c10::toString(tensor.scalar_type()), ", expected ", reference.numel(),
                              " of ", c10::toString(reference.scalar_type()), " (as the input)"));
  }
}

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  const auto* a_begin = static_cast<const std::byte*>(a.data_ptr());
  const auto* b_begin = static_cast<const std::byte*>(b.data_ptr());
  const size_t a_bytes = static_cast<size_t>(a.nbytes());
  const size_t b_bytes = static_cast<size_t>(b.nbytes());
  if (a_bytes == 0 || b_bytes == 0) return false;
  return a_begin < b_begin + b_bytes && b_begin < a_begin + a_bytes;
}

at::Tensor Staging::input(const at::Tensor& tensor) {
  at::Tensor contiguous = tensor.contiguous();
  kept_.push_back(contiguous);
  return contiguous;
}

at::Tensor Staging::output(const at::Tensor& tensor) {
  if (tensor.is_contiguous()) {
    kept_.push_back(tensor);
    return tensor;
  }
  // contiguous() copies the current values, which in-place collectives read.
  at::Tensor staged = tensor.contiguous();
  kept_.push_back(staged);
  at::Tensor target = tensor;
  after_.push_back([target, staged]() mutable { target.copy_(staged); });
  return staged;
}

void Staging::finish() {
  // The copies back are the collective's writes, not autograd's business:
  // without this, a leaf that requires grad would refuse them (grad mode is
  // per thread, and on by default on the Completer's).
  at::NoGradGuard no_grad;
  for (const std::function<void()>& step : after_) step();
  drop();
}

void Staging::drop() {
  after_.clear();
  kept_.clear();
}

}  // namespace chorus::torch_backend
