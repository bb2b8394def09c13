// ChorusJobValue: the rank, size, local rank or local size of the job, read
// when the op runs (Horovod's rank_op, size_op, local_rank_op,
// local_size_op), from the Context its handle names.
#include <string>

#include "adapters/tensorflow/context_registry.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace chorus::tensorflow_ops {
namespace {

namespace tf = ::tensorflow;

class JobValueKernel : public tf::OpKernel {
 public:
  explicit JobValueKernel(tf::OpKernelConstruction* construction) : OpKernel(construction) {
    OP_REQUIRES_OK(construction, construction->GetAttr("which", &which_));
    OP_REQUIRES_OK(construction, construction->GetAttr("context", &handle_));
  }

  void Compute(tf::OpKernelContext* context) override {
    const std::shared_ptr<SharedContext> shared = find_context(handle_);
    OP_REQUIRES(context, shared != nullptr,
                absl::FailedPreconditionError("chorus " + which_ + "_op: chorus context handle " +
                                              std::to_string(handle_) +
                                              " is not open; call chorus.tensorflow.init() first"));
    const Context& job = *shared->context;
    const int value = which_ == "rank"         ? job.rank()
                      : which_ == "size"       ? job.size()
                      : which_ == "local_rank" ? job.local_rank()
                                               : job.local_size();
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tf::TensorShape({}), &output));
    output->scalar<int32_t>()() = value;
  }

 private:
  std::string which_;
  int64_t handle_ = 0;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("ChorusJobValue").Device(tf::DEVICE_CPU), JobValueKernel);

}  // namespace chorus::tensorflow_ops
