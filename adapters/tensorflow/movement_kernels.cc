// The kernels that move without reducing: broadcast, allgather (one tensor
// or a group) with per-rank first dimensions, alltoall with or without
// splits. They move any type as bytes. Every rank's shapes and splits
// arrive with the negotiation (its descriptions), so an allgather or an
// alltoall needs no exchange of its own before the data moves.
#include <cstring>
#include <string>
#include <vector>

#include "adapters/tensorflow/kernel_support.h"
#include "adapters/tensorflow/output_pool.h"
#include "base/error.h"
#include "chorus/collectives.h"

namespace chorus::tensorflow_ops {
namespace {

size_t element_bytes(const tf::Tensor& tensor) { return static_cast<size_t>(tf::DataTypeSize(tensor.dtype())); }

// Bytes of one first-axis row of a tensor described as `dims`.
size_t row_bytes(const std::vector<int64_t>& dims, size_t element) {
  size_t bytes = element;
  for (size_t axis = 1; axis < dims.size(); ++axis) bytes *= static_cast<size_t>(dims[axis]);
  return bytes;
}

std::string which_tensor(bool grouped, int index) {
  return grouped ? " as tensor " + std::to_string(index) : std::string();
}

class BroadcastKernel : public CollectiveKernel {
 public:
  explicit BroadcastKernel(tf::OpKernelConstruction* construction) : CollectiveKernel(construction) {
    OP_REQUIRES_OK(construction, construction->GetAttr("root_rank", &root_));
  }

 protected:
  std::string what() const override { return "chorus broadcast"; }
  void describe(const Context& chorus, tf::OpKernelContext* context,
                negotiation::Description& description) override {
    description.kind = negotiation::Kind::broadcast;
    description.root = static_cast<int32_t>(root_);
    description.tensors.push_back(description_of(context->input(0)));
    if (root_ < 0 || root_ >= chorus.size()) {
      description.refusal = refusal(chorus, "root rank " + std::to_string(root_) + " is not a rank of this job of " +
                                                std::to_string(chorus.size()));
    }
    carry_inputs(context, description);
  }
  void collective(Context& chorus, tf::OpKernelContext* context,
                  std::span<const negotiation::Description* const> everyone) override {
    const tf::Tensor& input = context->input(0);
    tf::Tensor* output = nullptr;
    check(forward_or_allocate_pooled(context, 0, 0, input.shape(), &output));
    if (everyone_carries(everyone)) {
      const auto root = static_cast<size_t>(root_);
      std::memcpy(output->data(), carried(*everyone[root], input.TotalBytes(), root), input.TotalBytes());
      return;
    }
    if (chorus.rank() == root_ && output->data() != input.data()) {
      std::memcpy(output->data(), input.data(), input.TotalBytes());
    }
    broadcast(chorus, output->data(), input.TotalBytes(), DataType::uint8, static_cast<int>(root_));
  }

 private:
  int64_t root_ = 0;
};

// Allgather of one tensor or a group: one allgatherv of every rank's
// tensors packed end to end (a single tensor lands in its output directly).
class AllgatherKernel : public CollectiveKernel {
 public:
  AllgatherKernel(tf::OpKernelConstruction* construction, bool grouped)
      : CollectiveKernel(construction), grouped_(grouped) {}

 protected:
  std::string what() const override { return grouped_ ? "chorus grouped_allgather" : "chorus allgather"; }
  void describe(const Context& chorus, tf::OpKernelContext* context,
                negotiation::Description& description) override {
    description.kind = grouped_ ? negotiation::Kind::grouped_allgather : negotiation::Kind::allgather;
    for (int index = 0; index < context->num_inputs(); ++index) {
      description.tensors.push_back(description_of(context->input(index)));
      if (context->input(index).dims() < 1) {
        description.refusal = refusal(chorus, "passed a scalar" + which_tensor(grouped_, index) +
                                                  "; allgather concatenates the ranks' tensors on their first "
                                                  "dimension");
      }
    }
    carry_inputs(context, description);
  }
  void collective(Context& chorus, tf::OpKernelContext* context,
                  std::span<const negotiation::Description* const> everyone) override {
    const size_t size = everyone.size();
    const auto members = static_cast<size_t>(context->num_inputs());
    const size_t element = element_bytes(context->input(0));
    // bytes[r][i]: rank r's member i; counts[r]: all of rank r's.
    std::vector<std::vector<size_t>> bytes(size, std::vector<size_t>(members));
    std::vector<size_t> counts(size, 0);
    for (size_t rank = 0; rank < size; ++rank) {
      for (size_t index = 0; index < members; ++index) {
        const std::vector<int64_t>& dims = everyone[rank]->tensors[index].dims;
        bytes[rank][index] = static_cast<size_t>(dims[0]) * row_bytes(dims, element);
        counts[rank] += bytes[rank][index];
      }
    }
    std::vector<tf::Tensor*> outputs(members);
    for (size_t index = 0; index < members; ++index) {
      const tf::Tensor& input = context->input(static_cast<int>(index));
      int64_t rows = 0;
      for (size_t rank = 0; rank < size; ++rank) rows += everyone[rank]->tensors[index].dims[0];
      tf::TensorShape shape = input.shape();
      shape.set_dim(0, rows);
      check(allocate_pooled_output(context, static_cast<int>(index), shape, &outputs[index]));
    }
    // Member i's output: rank 0's member i, rank 1's, ...; from the ranks'
    // carried data, or from one allgatherv of each rank's members end to end.
    std::vector<const std::byte*> from(size);
    std::vector<std::byte> gathered;
    if (everyone_carries(everyone)) {
      for (size_t rank = 0; rank < size; ++rank) from[rank] = carried(*everyone[rank], counts[rank], rank);
    } else if (members == 1) {
      allgatherv(chorus, context->input(0).data(), outputs[0]->data(), counts, DataType::uint8);
      return;
    } else {
      size_t total = 0;
      for (size_t count : counts) total += count;
      std::vector<std::byte> mine;
      gathered.resize(total);
      for (size_t index = 0; index < members; ++index) {
        const tf::Tensor& input = context->input(static_cast<int>(index));
        const auto* begin = static_cast<const std::byte*>(input.data());
        mine.insert(mine.end(), begin, begin + input.TotalBytes());
      }
      allgatherv(chorus, mine.data(), gathered.data(), counts, DataType::uint8);
      size_t at = 0;
      for (size_t rank = 0; rank < size; ++rank) {
        from[rank] = gathered.data() + at;
        at += counts[rank];
      }
    }
    std::vector<size_t> filled(members, 0);
    for (size_t rank = 0; rank < size; ++rank) {
      const std::byte* at = from[rank];
      for (size_t index = 0; index < members; ++index) {
        const size_t count = bytes[rank][index];
        if (count > 0) std::memcpy(static_cast<std::byte*>(outputs[index]->data()) + filled[index], at, count);
        filled[index] += count;
        at += count;
      }
    }
  }

 private:
  bool grouped_;
};

class SingleAllgatherKernel : public AllgatherKernel {
 public:
  explicit SingleAllgatherKernel(tf::OpKernelConstruction* construction) : AllgatherKernel(construction, false) {}
};

class GroupedAllgatherKernel : public AllgatherKernel {
 public:
  explicit GroupedAllgatherKernel(tf::OpKernelConstruction* construction) : AllgatherKernel(construction, true) {}
};

class AlltoallKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

 protected:
  std::string what() const override { return "chorus alltoall"; }
  // The rows for each rank go with the description: `given`, or with none
  // given the first dimension split evenly.
  void describe(const Context& chorus, tf::OpKernelContext* context,
                negotiation::Description& description) override {
    description.kind = negotiation::Kind::alltoall;
    const tf::Tensor& input = context->input(0);
    const tf::Tensor& given = context->input(1);
    description.tensors.push_back(description_of(input));
    const auto size = static_cast<int64_t>(chorus.size());
    if (input.dims() < 1) {
      description.refusal = refusal(chorus, "passed a scalar; alltoall sends rows of its first dimension");
      return;
    }
    const int64_t rows = input.dim_size(0);
    if (given.NumElements() == 0) {
      if (rows % size != 0) {
        description.refusal = refusal(chorus, "passed " + std::to_string(rows) +
                                                  " rows, which do not split evenly among " + std::to_string(size) +
                                                  " ranks; pass splits");
        return;
      }
      description.counts.assign(static_cast<size_t>(size), rows / size);
      return;
    }
    const auto values = given.flat<int32_t>();
    int64_t total = 0;
    bool negative = false;
    for (int64_t peer = 0; peer < values.size(); ++peer) {
      total += values(peer);
      negative = negative || values(peer) < 0;
    }
    if (given.dims() != 1 || values.size() != size || total != rows || negative) {
      description.refusal = refusal(chorus, "passed splits of shape " + given.shape().DebugString() +
                                                " summing to " + std::to_string(total) + "; expected " +
                                                std::to_string(size) + " non-negative entries, one per rank, " +
                                                "summing to its " + std::to_string(rows) + " rows");
      return;
    }
    description.counts.assign(values.data(), values.data() + size);
  }
  void collective(Context& chorus, tf::OpKernelContext* context,
                  std::span<const negotiation::Description* const> everyone) override {
    const tf::Tensor& input = context->input(0);
    const size_t size = everyone.size();
    const auto me = static_cast<size_t>(chorus.rank());
    const size_t row = row_bytes(everyone[me]->tensors[0].dims, element_bytes(input));
    std::vector<size_t> send_counts(size), receive_counts(size);
    int64_t rows = 0;
    tf::Tensor* received_splits = nullptr;
    check(context->allocate_output(1, tf::TensorShape({static_cast<int64_t>(size)}), &received_splits));
    auto received = received_splits->vec<int32_t>();
    for (size_t peer = 0; peer < size; ++peer) {
      const std::vector<int64_t>& theirs = everyone[peer]->counts;
      if (theirs.size() != size || theirs[me] < 0) {
        throw MismatchError("rank " + std::to_string(me) + ": chorus alltoall: rank " + std::to_string(peer) +
                            " announced " + std::to_string(theirs.size()) + " splits for " + std::to_string(size) +
                            " ranks");
      }
      const int64_t from_peer = theirs[me];
      send_counts[peer] = static_cast<size_t>(everyone[me]->counts[peer]) * row;
      receive_counts[peer] = static_cast<size_t>(from_peer) * row;
      received(static_cast<int64_t>(peer)) = static_cast<int32_t>(from_peer);
      rows += from_peer;
    }
    tf::TensorShape shape = input.shape();
    shape.set_dim(0, rows);
    tf::Tensor* output = nullptr;
    check(allocate_pooled_output(context, 0, shape, &output));
    alltoallv(chorus, input.data(), send_counts, output->data(), receive_counts, DataType::uint8);
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("ChorusBroadcast").Device(tf::DEVICE_CPU), BroadcastKernel);
REGISTER_KERNEL_BUILDER(Name("ChorusAllgather").Device(tf::DEVICE_CPU), SingleAllgatherKernel);
REGISTER_KERNEL_BUILDER(Name("ChorusGroupedAllgather").Device(tf::DEVICE_CPU), GroupedAllgatherKernel);
REGISTER_KERNEL_BUILDER(Name("ChorusAlltoall").Device(tf::DEVICE_CPU), AlltoallKernel);

}  // namespace chorus::tensorflow_ops
