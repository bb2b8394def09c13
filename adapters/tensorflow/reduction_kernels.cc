// The kernels that reduce: allreduce and reducescatter over the first
// dimension, one tensor or a group of them as one collective. Any chorus
// ReduceOp; 'avg' is Horovod's Average, and the prescale and postscale
// factors are applied as Horovod applies them (scaling.h).
#include <cstring>
#include <string>
#include <vector>

#include "adapters/tensorflow/kernel_support.h"
#include "adapters/tensorflow/output_pool.h"
#include "adapters/tensorflow/scaling.h"
#include "base/reduce.h"
#include "chorus/collectives.h"

namespace chorus::tensorflow_ops {
namespace {

// Horovod's split of a reducescatter's first dimension: rows / size each,
// one more on the first rows % size ranks.
size_t rows_of_rank(size_t rows, size_t size, size_t rank) { return rows / size + (rank < rows % size ? 1 : 0); }

class ReducingKernel : public CollectiveKernel {
 public:
  explicit ReducingKernel(tf::OpKernelConstruction* construction) : CollectiveKernel(construction) {
    std::string name;
    OP_REQUIRES_OK(construction, construction->GetAttr("reduce_op", &name));
    // The op's attribute admits chorus's names only.
    op_ = parse_reduce_op(name).value_or(ReduceOp::sum);
    OP_REQUIRES_OK(construction, construction->GetAttr("prescale_factor", &prescale_));
    OP_REQUIRES_OK(construction, construction->GetAttr("postscale_factor", &postscale_));
  }

 protected:
  // The tensors of every input, and this kernel's op and factors.
  void describe_reduction(tf::OpKernelContext* context, negotiation::Description& description) const {
    description.op = static_cast<uint8_t>(op_);
    description.prescale = prescale_;
    description.postscale = postscale_;
    for (int input = 0; input < context->num_inputs(); ++input) {
      description.tensors.push_back(description_of(context->input(input)));
    }
  }
  // What chorus reduces with: Average is a sum, divided in the postscale.
  ReduceOp chorus_op() const { return op_ == ReduceOp::avg ? ReduceOp::sum : op_; }
  double prescale() const { return prescale_; }
  double postscale(const Context& chorus) const {
    return op_ == ReduceOp::avg ? static_cast<double>(postscale_) / chorus.size() : postscale_;
  }
  static DataType type_of(const tf::Tensor& tensor) {
    // The op's attribute admits reducible types only.
    return reducible_type_of(tensor.dtype()).value_or(DataType::uint8);
  }
  // Input `index` as a member of an allreduce: its output (the input
  // itself when TensorFlow lets it go) and where the reduction reads from
  // (the input, or the output holding it prescaled).
  GroupMember member(tf::OpKernelContext* context, int index, DataType type) const {
    const tf::Tensor& input = context->input(index);
    tf::Tensor* output = nullptr;
    check(forward_or_allocate_pooled(context, index, index, input.shape(), &output));
    const auto count = static_cast<size_t>(input.NumElements());
    if (prescale() == 1.0) return {input.data(), output->data(), count};
    prescaled(type, input.data(), output->data(), count);
    return {output->data(), output->data(), count};
  }
  // The reduced members scaled by the postscale factor (and Average's 1 / size).
  void postscaled(const Context& chorus, DataType type, std::span<const GroupMember> members) const {
    if (const double factor = postscale(chorus); factor != 1.0) {
      for (const GroupMember& reduced : members) scale(type, reduced.output, reduced.output, reduced.count, factor);
    }
  }
  // The members reduced from every rank's carried data (the inputs end to
  // end), in rank order, prescaled as they would be on the wire.
  void reduce_carried(std::span<const negotiation::Description* const> everyone, DataType type,
                      std::span<const GroupMember> members) const {
    size_t total = 0;
    for (const GroupMember& one : members) total += one.count * element_size(type);
    std::vector<std::byte> scaled;
    for (size_t rank = 0; rank < everyone.size(); ++rank) {
      const std::byte* data = carried(*everyone[rank], total, rank);
      for (const GroupMember& one : members) {
        const size_t bytes = one.count * element_size(type);
        if (rank == 0) {
          prescaled(type, data, one.output, one.count);
        } else if (prescale() == 1.0) {
          reduce_into(type, chorus_op(), one.output, data, one.count);
        } else {
          scaled.resize(bytes);
          scale(type, data, scaled.data(), one.count, prescale());
          reduce_into(type, chorus_op(), one.output, scaled.data(), one.count);
        }
        data += bytes;
      }
    }
  }
  // `count` elements of `input` into `output`, scaled by the prescale factor.
  void prescaled(DataType type, const void* input, void* output, size_t count) const {
    if (prescale() != 1.0) {
      scale(type, input, output, count, prescale());
    } else if (output != input) {
      std::memcpy(output, input, count * element_size(type));
    }
  }

 private:
  ReduceOp op_ = ReduceOp::sum;
  float prescale_ = 1.0f;
  float postscale_ = 1.0f;
};

class AllreduceKernel : public ReducingKernel {
 public:
  using ReducingKernel::ReducingKernel;

 protected:
  std::string what() const override { return "chorus allreduce"; }
  void describe(const Context&, tf::OpKernelContext* context, negotiation::Description& description) override {
    description.kind = negotiation::Kind::allreduce;
    describe_reduction(context, description);
    carry_inputs(context, description);
  }
  void collective(Context& chorus, tf::OpKernelContext* context,
                  std::span<const negotiation::Description* const> everyone) override {
    const DataType type = type_of(context->input(0));
    const GroupMember one = member(context, 0, type);
    if (everyone_carries(everyone)) {
      reduce_carried(everyone, type, std::span(&one, 1));
    } else {
      allreduce(chorus, one.input, one.output, one.count, type, chorus_op());
    }
    postscaled(chorus, type, std::span(&one, 1));
  }
};

class GroupedAllreduceKernel : public ReducingKernel {
 public:
  using ReducingKernel::ReducingKernel;

 protected:
  std::string what() const override { return "chorus grouped_allreduce"; }
  void describe(const Context&, tf::OpKernelContext* context, negotiation::Description& description) override {
    description.kind = negotiation::Kind::grouped_allreduce;
    describe_reduction(context, description);
    carry_inputs(context, description);
  }
  void collective(Context& chorus, tf::OpKernelContext* context,
                  std::span<const negotiation::Description* const> everyone) override {
    const DataType type = type_of(context->input(0));
    std::vector<GroupMember> members;
    for (int index = 0; index < context->num_inputs(); ++index) members.push_back(member(context, index, type));
    if (everyone_carries(everyone)) {
      reduce_carried(everyone, type, members);
    } else {
      grouped_allreduce(chorus, members, type, chorus_op());
    }
    postscaled(chorus, type, members);
  }
};

// Reducescatter of one tensor or a group, as one reduce_scatter_v: the
// members' blocks for rank r are packed next to each other, so rank r's
// share of the packed buffer is its block of every member.
class ReducescatterKernel : public ReducingKernel {
 public:
  ReducescatterKernel(tf::OpKernelConstruction* construction, bool grouped)
      : ReducingKernel(construction), grouped_(grouped) {}

 protected:
  std::string what() const override { return grouped_ ? "chorus grouped_reducescatter" : "chorus reducescatter"; }
  void describe(const Context& chorus, tf::OpKernelContext* context,
                negotiation::Description& description) override {
    description.kind = grouped_ ? negotiation::Kind::grouped_reducescatter : negotiation::Kind::reducescatter;
    describe_reduction(context, description);
    for (int index = 0; index < context->num_inputs(); ++index) {
      if (context->input(index).dims() < 1) {
        description.refusal = refusal(chorus, "passed a scalar" + (grouped_ ? " as tensor " + std::to_string(index)
                                                                              : std::string()) +
                                                  "; reducescatter splits the first dimension among the ranks");
      }
    }
  }
  void collective(Context& chorus, tf::OpKernelContext* context,
                  std::span<const negotiation::Description* const>) override {
    const size_t size = static_cast<size_t>(chorus.size());
    const auto me = static_cast<size_t>(chorus.rank());
    const DataType type = type_of(context->input(0));
    const size_t element = element_size(type);
    const auto members = static_cast<size_t>(context->num_inputs());
    // counts[r]: rank r's share of the packed buffer, in elements.
    std::vector<size_t> counts(size, 0);
    size_t total = 0;
    for (size_t index = 0; index < members; ++index) {
      const tf::Tensor& input = context->input(static_cast<int>(index));
      const auto rows = static_cast<size_t>(input.dim_size(0));
      for (size_t rank = 0; rank < size; ++rank) counts[rank] += rows_of_rank(rows, size, rank) * row_elements(input.shape());
      total += static_cast<size_t>(input.NumElements());
    }
    const double factor = postscale(chorus);
    if (members == 1 && prescale() == 1.0 && factor == 1.0) {
      // One tensor, unscaled: its rows are already packed in rank order.
      const tf::Tensor& input = context->input(0);
      tf::TensorShape shape = input.shape();
      shape.set_dim(0, static_cast<int64_t>(rows_of_rank(static_cast<size_t>(input.dim_size(0)), size, me)));
      tf::Tensor* output = nullptr;
      check(allocate_pooled_output(context, 0, shape, &output));
      reduce_scatter_v(chorus, input.data(), output->data(), counts, type, chorus_op());
      return;
    }
    tf::Tensor packed;
    check(context->allocate_temp(context->input(0).dtype(), tf::TensorShape({static_cast<int64_t>(total)}), &packed));
    auto* bytes = static_cast<std::byte*>(packed.data());
    // Rank r's blocks of every member, then rank r + 1's, ...
    size_t at = 0;
    for (size_t rank = 0; rank < size; ++rank) {
      for (size_t index = 0; index < members; ++index) {
        const tf::Tensor& input = context->input(static_cast<int>(index));
        const auto rows = static_cast<size_t>(input.dim_size(0));
        const size_t row = row_elements(input.shape());
        size_t first_row = 0;
        for (size_t before = 0; before < rank; ++before) first_row += rows_of_rank(rows, size, before);
        const size_t count = rows_of_rank(rows, size, rank) * row;
        prescaled(type, static_cast<const std::byte*>(input.data()) + first_row * row * element,
                  bytes + at * element, count);
        at += count;
      }
    }
    tf::Tensor mine;
    check(context->allocate_temp(context->input(0).dtype(), tf::TensorShape({static_cast<int64_t>(counts[me])}),
                                 &mine));
    reduce_scatter_v(chorus, packed.data(), mine.data(), counts, type, chorus_op());
    size_t offset = 0;
    for (size_t index = 0; index < members; ++index) {
      const tf::Tensor& input = context->input(static_cast<int>(index));
      tf::TensorShape shape = input.shape();
      shape.set_dim(0, static_cast<int64_t>(rows_of_rank(static_cast<size_t>(input.dim_size(0)), size, me)));
      tf::Tensor* output = nullptr;
      check(allocate_pooled_output(context, static_cast<int>(index), shape, &output));
      const auto count = static_cast<size_t>(shape.num_elements());
      const std::byte* from = static_cast<const std::byte*>(mine.data()) + offset * element;
      if (factor != 1.0) {
        scale(type, from, output->data(), count, factor);
      } else if (count > 0) {
        std::memcpy(output->data(), from, count * element);
      }
      offset += count;
    }
  }

 private:
  bool grouped_;
};

class SingleReducescatterKernel : public ReducescatterKernel {
 public:
  explicit SingleReducescatterKernel(tf::OpKernelConstruction* construction)
      : ReducescatterKernel(construction, false) {}
};

class GroupedReducescatterKernel : public ReducescatterKernel {
 public:
  explicit GroupedReducescatterKernel(tf::OpKernelConstruction* construction)
      : ReducescatterKernel(construction, true) {}
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("ChorusAllreduce").Device(tf::DEVICE_CPU), AllreduceKernel);
REGISTER_KERNEL_BUILDER(Name("ChorusGroupedAllreduce").Device(tf::DEVICE_CPU), GroupedAllreduceKernel);
REGISTER_KERNEL_BUILDER(Name("ChorusReducescatter").Device(tf::DEVICE_CPU), SingleReducescatterKernel);
REGISTER_KERNEL_BUILDER(Name("ChorusGroupedReducescatter").Device(tf::DEVICE_CPU), GroupedReducescatterKernel);

}  // namespace chorus::tensorflow_ops
