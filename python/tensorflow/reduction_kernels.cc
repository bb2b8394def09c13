// The kernels that reduce: allreduce (any chorus ReduceOp, avg being
// Horovod's Average) and reducescatter over the first dimension.
#include <string>
#include <vector>

#include "chorus/collectives.h"
#include "python/tensorflow/kernel_support.h"
#include "python/tensorflow/output_pool.h"

namespace chorus::tensorflow_ops {
namespace {

class ReducingKernel : public CollectiveKernel {
 public:
  explicit ReducingKernel(tf::OpKernelConstruction* construction) : CollectiveKernel(construction) {
    std::string name;
    OP_REQUIRES_OK(construction, construction->GetAttr("reduce_op", &name));
    // The op's attribute admits chorus's names only.
    op_ = parse_reduce_op(name).value_or(ReduceOp::sum);
  }

 protected:
  ReduceOp op_ = ReduceOp::sum;
};

class AllreduceKernel : public ReducingKernel {
 public:
  using ReducingKernel::ReducingKernel;

 protected:
  std::string what() const override { return "chorus allreduce"; }
  void collective(Context& chorus, tf::OpKernelContext* context, DataType type) override {
    const tf::Tensor& input = context->input(0);
    tf::Tensor* output = nullptr;
    // In place when TensorFlow lets the input go.
    check(forward_or_allocate_pooled(context, 0, 0, input.shape(), &output));
    allreduce(chorus, input.data(), output->data(), static_cast<size_t>(input.NumElements()), type, op_);
  }
};

class ReducescatterKernel : public ReducingKernel {
 public:
  using ReducingKernel::ReducingKernel;

 protected:
  std::string what() const override { return "chorus reducescatter"; }
  void collective(Context& chorus, tf::OpKernelContext* context, DataType type) override {
    const tf::Tensor& input = context->input(0);
    if (input.dims() < 1) {
      fail_everywhere(chorus, what() + ": rank " + std::to_string(chorus.rank()) +
                                  " passed a scalar; the tensor needs a first dimension to scatter");
    }
    const size_t size = static_cast<size_t>(chorus.size());
    const size_t rows = static_cast<size_t>(input.dim_size(0));
    const size_t row = row_elements(input.shape());
    const auto rows_of = [&](size_t rank) { return rows / size + (rank < rows % size ? 1 : 0); };
    std::vector<size_t> counts(size);
    for (size_t rank = 0; rank < size; ++rank) counts[rank] = rows_of(rank) * row;
    tf::TensorShape shape = input.shape();
    shape.set_dim(0, static_cast<int64_t>(rows_of(static_cast<size_t>(chorus.rank()))));
    tf::Tensor* output = nullptr;
    check(allocate_pooled_output(context, 0, shape, &output));
    reduce_scatter_v(chorus, input.data(), output->data(), counts, type, op_);
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("ChorusAllreduce").Device(tf::DEVICE_CPU), AllreduceKernel);
REGISTER_KERNEL_BUILDER(Name("ChorusReducescatter").Device(tf::DEVICE_CPU), ReducescatterKernel);

}  // namespace chorus::tensorflow_ops
