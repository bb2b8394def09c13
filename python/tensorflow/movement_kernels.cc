// The kernels that move without reducing: broadcast, allgather with
// per-rank first dimensions, alltoall with or without splits. The ones whose
// output shape depends on the other ranks first exchange shapes, so that a
// mismatch is found, and named, on every rank.
#include <cstring>
#include <string>
#include <vector>

#include "chorus/collectives.h"
#include "python/tensorflow/kernel_support.h"
#include "python/tensorflow/output_pool.h"

namespace chorus::tensorflow_ops {
namespace {

class BroadcastKernel : public CollectiveKernel {
 public:
  explicit BroadcastKernel(tf::OpKernelConstruction* construction) : CollectiveKernel(construction) {
    OP_REQUIRES_OK(construction, construction->GetAttr("root_rank", &root_));
  }

 protected:
  std::string what() const override { return "chorus broadcast"; }
  void collective(Context& chorus, tf::OpKernelContext* context, DataType type) override {
    const tf::Tensor& input = context->input(0);
    tf::Tensor* output = nullptr;
    check(forward_or_allocate_pooled(context, 0, 0, input.shape(), &output));
    if (chorus.rank() == root_ && output->data() != input.data()) {
      std::memcpy(output->data(), input.data(), input.TotalBytes());
    }
    broadcast(chorus, output->data(), static_cast<size_t>(input.NumElements()), type, root_);
  }

 private:
  int root_ = 0;
};

// What a rank tells the others before an allgather: its dtype, rank and dims.
constexpr size_t kMostDims = 32;
constexpr size_t kDescriptionSize = 2 + kMostDims;

std::vector<int64_t> describe(const tf::Tensor& tensor) {
  std::vector<int64_t> description(kDescriptionSize, 0);
  description[0] = tensor.dtype();
  description[1] = tensor.dims();
  for (int axis = 0; axis < tensor.dims(); ++axis) description[2 + static_cast<size_t>(axis)] = tensor.dim_size(axis);
  return description;
}

std::string described(const int64_t* description) {
  std::string text = tf::DataTypeString(static_cast<tf::DataType>(description[0])) + " tensor of shape [";
  for (int64_t axis = 0; axis < description[1]; ++axis) {
    if (axis > 0) text += ", ";
    text += std::to_string(description[2 + axis]);
  }
  return text + "]";
}

// Equal but for the first dimension.
bool gatherable(const int64_t* one, const int64_t* other) {
  return one[0] == other[0] && one[1] == other[1] && std::equal(one + 3, one + kDescriptionSize, other + 3);
}

class AllgatherKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

 protected:
  std::string what() const override { return "chorus allgather"; }
  void collective(Context& chorus, tf::OpKernelContext* context, DataType type) override {
    const tf::Tensor& input = context->input(0);
    const std::string rank = "rank " + std::to_string(chorus.rank());
    if (input.dims() < 1 || static_cast<size_t>(input.dims()) > kMostDims) {
      fail_everywhere(chorus, what() + ": " + rank + " passed a tensor of " + std::to_string(input.dims()) +
                                  " dimensions; it takes 1 to " + std::to_string(kMostDims));
    }
    const size_t size = static_cast<size_t>(chorus.size());
    const std::vector<int64_t> mine = describe(input);
    std::vector<int64_t> everyone(size * kDescriptionSize);
    allgather(chorus, mine.data(), everyone.data(), kDescriptionSize, DataType::int64);
    // Every rank compares everyone with rank 0, so all of them fail alike.
    for (size_t peer = 1; peer < size; ++peer) {
      const int64_t* theirs = everyone.data() + peer * kDescriptionSize;
      if (!gatherable(everyone.data(), theirs)) {
        throw KernelFailure(absl::InvalidArgumentError(
            what() + " (on " + rank + "): rank " + std::to_string(peer) + " passed a " + described(theirs) +
            " and rank 0 a " + described(everyone.data()) + "; ranks may differ in the first dimension only"));
      }
    }
    const size_t row = row_elements(input.shape());
    std::vector<size_t> counts(size);
    int64_t rows = 0;
    for (size_t peer = 0; peer < size; ++peer) {
      const int64_t peer_rows = everyone[peer * kDescriptionSize + 2];
      counts[peer] = static_cast<size_t>(peer_rows) * row;
      rows += peer_rows;
    }
    tf::TensorShape shape = input.shape();
    shape.set_dim(0, rows);
    tf::Tensor* output = nullptr;
    check(allocate_pooled_output(context, 0, shape, &output));
    allgatherv(chorus, input.data(), output->data(), counts, type);
  }
};

// Per peer before an alltoall: the rows going to it, the elements of a row, the dtype.
constexpr size_t kExchangeSize = 3;

class AlltoallKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

 protected:
  std::string what() const override { return "chorus alltoall"; }
  void collective(Context& chorus, tf::OpKernelContext* context, DataType type) override {
    const tf::Tensor& input = context->input(0);
    const std::string rank = "rank " + std::to_string(chorus.rank());
    const std::vector<int64_t> splits = splits_of(chorus, input, context->input(1), rank);
    const size_t size = static_cast<size_t>(chorus.size());
    const auto row = static_cast<int64_t>(row_elements(input.shape()));
    std::vector<int64_t> told(size * kExchangeSize);
    for (size_t peer = 0; peer < size; ++peer) {
      told[peer * kExchangeSize] = splits[peer];
      told[peer * kExchangeSize + 1] = row;
      told[peer * kExchangeSize + 2] = input.dtype();
    }
    std::vector<int64_t> heard(size * kExchangeSize);
    alltoall(chorus, told.data(), heard.data(), kExchangeSize, DataType::int64);
    std::vector<size_t> send_counts(size), receive_counts(size);
    int64_t rows = 0;
    for (size_t peer = 0; peer < size; ++peer) {
      const int64_t* from = heard.data() + peer * kExchangeSize;
      // A mismatch is seen from both of its ends, so every rank involved fails.
      if (from[1] != row || from[2] != input.dtype()) {
        throw KernelFailure(absl::InvalidArgumentError(
            what() + ": rank " + std::to_string(peer) + " sends " +
            tf::DataTypeString(static_cast<tf::DataType>(from[2])) + " rows of " + std::to_string(from[1]) +
            " elements but " + rank + " " + tf::DataTypeString(input.dtype()) + " rows of " + std::to_string(row) +
            " elements; ranks may differ in the first dimension only"));
      }
      send_counts[peer] = static_cast<size_t>(splits[peer] * row);
      receive_counts[peer] = static_cast<size_t>(from[0] * row);
      rows += from[0];
    }
    tf::TensorShape shape = input.shape();
    shape.set_dim(0, rows);
    tf::Tensor* output = nullptr;
    check(allocate_pooled_output(context, 0, shape, &output));
    tf::Tensor* received_splits = nullptr;
    check(context->allocate_output(1, tf::TensorShape({static_cast<int64_t>(size)}), &received_splits));
    auto received = received_splits->vec<int32_t>();
    for (size_t peer = 0; peer < size; ++peer) {
      received(static_cast<int64_t>(peer)) = static_cast<int32_t>(heard[peer * kExchangeSize]);
    }
    alltoallv(chorus, input.data(), send_counts, output->data(), receive_counts, type);
  }

 private:
  // The rows for each peer: `given`, or with none given the first dimension split evenly.
  std::vector<int64_t> splits_of(Context& chorus, const tf::Tensor& input, const tf::Tensor& given,
                                 const std::string& rank) const {
    const auto size = static_cast<int64_t>(chorus.size());
    if (input.dims() < 1) fail_everywhere(chorus, what() + ": " + rank + " passed a scalar; it needs rows to send");
    const int64_t rows = input.dim_size(0);
    if (given.NumElements() == 0) {
      if (rows % size != 0) {
        fail_everywhere(chorus, what() + ": " + rank + " passed " + std::to_string(rows) +
                                    " rows, which do not split evenly among " + std::to_string(size) +
                                    " ranks; pass splits");
      }
      return std::vector<int64_t>(static_cast<size_t>(size), rows / size);
    }
    const auto values = given.flat<int32_t>();
    int64_t total = 0;
    bool negative = false;
    for (int64_t peer = 0; peer < values.size(); ++peer) {
      total += values(peer);
      negative = negative || values(peer) < 0;
    }
    if (given.dims() != 1 || values.size() != size || total != rows || negative) {
      fail_everywhere(chorus, what() + ": " + rank + " passed splits of shape " + given.shape().DebugString() +
                                  " summing to " + std::to_string(total) + "; expected " + std::to_string(size) +
                                  " non-negative entries, one per rank, summing to its " + std::to_string(rows) +
                                  " rows");
    }
    return std::vector<int64_t>(values.data(), values.data() + size);
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("ChorusBroadcast").Device(tf::DEVICE_CPU), BroadcastKernel);
REGISTER_KERNEL_BUILDER(Name("ChorusAllgather").Device(tf::DEVICE_CPU), AllgatherKernel);
REGISTER_KERNEL_BUILDER(Name("ChorusAlltoall").Device(tf::DEVICE_CPU), AlltoallKernel);

}  // namespace chorus::tensorflow_ops
