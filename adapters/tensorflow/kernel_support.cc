#include "adapters/tensorflow/kernel_support.h"

#include <utility>

#include "adapters/tensorflow/context_registry.h"
#include "base/error.h"

namespace chorus::tensorflow_ops {

std::optional<DataType> reducible_type_of(tf::DataType type) {
  switch (type) {
    case tf::DT_INT8: return DataType::int8;
    case tf::DT_UINT8: return DataType::uint8;
    case tf::DT_INT32: return DataType::int32;
    case tf::DT_UINT32: return DataType::uint32;
    case tf::DT_INT64: return DataType::int64;
    case tf::DT_UINT64: return DataType::uint64;
    case tf::DT_HALF: return DataType::float16;
    case tf::DT_BFLOAT16: return DataType::bfloat16;
    case tf::DT_FLOAT: return DataType::float32;
    case tf::DT_DOUBLE: return DataType::float64;
    default: return std::nullopt;
  }
}

absl::Status status_of(std::exception_ptr failure, const std::string& op) {
  try {
    std::rethrow_exception(std::move(failure));
  } catch (const KernelFailure& kernel_failure) {
    return kernel_failure.status();
  } catch (const IoError& error) {
    // PeerLostError among them: the peer's rank is in the message.
    return absl::UnavailableError(op + ": " + error.what());
  } catch (const TimeoutError& error) {
    return absl::DeadlineExceededError(op + ": " + error.what());
  } catch (const InvalidArgument& error) {
    return absl::InvalidArgumentError(op + ": " + error.what());
  } catch (const MismatchError& error) {
    return absl::FailedPreconditionError(op + ": " + error.what());
  } catch (const Aborted& error) {
    return absl::AbortedError(op + ": " + error.what());
  } catch (const std::exception& error) {
    return absl::InternalError(op + ": " + error.what());
  } catch (...) {
    return absl::InternalError(op + ": an exception that is not a std::exception");
  }
}

void check(const absl::Status& status) {
  if (!status.ok()) throw KernelFailure(status);
}

size_t row_elements(const tf::TensorShape& shape) {
  size_t elements = 1;
  for (int axis = 1; axis < shape.dims(); ++axis) elements *= static_cast<size_t>(shape.dim_size(axis));
  return elements;
}

negotiation::TensorDescription description_of(const tf::Tensor& tensor) {
  negotiation::TensorDescription description;
  description.type = static_cast<int32_t>(tensor.dtype());
  for (int axis = 0; axis < tensor.dims(); ++axis) description.dims.push_back(tensor.dim_size(axis));
  return description;
}

void carry_inputs(tf::OpKernelContext* context, negotiation::Description& description) {
  size_t total = 0;
  for (int input = 0; input < context->num_inputs(); ++input) total += context->input(input).TotalBytes();
  if (total > negotiation::kLongestCarriedData) return;
  description.carries_data = true;
  description.data.reserve(total);
  for (int input = 0; input < context->num_inputs(); ++input) {
    const tf::Tensor& tensor = context->input(input);
    const auto* bytes = static_cast<const std::byte*>(tensor.data());
    description.data.insert(description.data.end(), bytes, bytes + tensor.TotalBytes());
  }
}

bool everyone_carries(std::span<const negotiation::Description* const> everyone) {
  for (const negotiation::Description* description : everyone) {
    if (!description->carries_data) return false;
  }
  return true;
}

const std::byte* carried(const negotiation::Description& description, size_t bytes, size_t rank) {
  if (description.data.size() != bytes) {
    throw MismatchError("chorus: rank " + std::to_string(rank) + " carried " + std::to_string(description.data.size()) +
                        " bytes of data where its description says " + std::to_string(bytes));
  }
  return description.data.data();
}

CollectiveKernel::CollectiveKernel(tf::OpKernelConstruction* construction) : AsyncOpKernel(construction) {
  OP_REQUIRES_OK(construction, construction->GetAttr("context", &handle_));
  OP_REQUIRES_OK(construction, construction->GetAttr("tensor_name", &tensor_name_));
  bool by_name = false;
  OP_REQUIRES_OK(construction, construction->GetAttr("match_by_name", &by_name));
  matching_ = by_name ? negotiation::Matching::by_name : negotiation::Matching::in_order;
}

std::string CollectiveKernel::refusal(const Context& chorus, const std::string& reason) const {
  return "rank " + std::to_string(chorus.rank()) + ": " + what() + ": " + reason;
}

void CollectiveKernel::ComputeAsync(tf::OpKernelContext* context, DoneCallback done) {
  const std::shared_ptr<SharedContext> shared = find_context(handle_);
  OP_REQUIRES_ASYNC(context, shared != nullptr,
                    absl::FailedPreconditionError(what() + ": chorus context handle " + std::to_string(handle_) +
                                                  " is not open (chorus.tensorflow.shutdown() ran, or init() "
                                                  "did not); call chorus.tensorflow.init() first"),
                    done);
  negotiation::Call call;
  negotiation::Description& description = call.description;
  description.matching = matching_;
  // chorus.tensorflow names every call (_ops.py's matching()): the name the
  // caller gave, or one numbering the collectives of its graph or function.
  description.name = tensor_name_;
  describe(*shared->context, context, description);
  for (int input = 0; input < context->num_inputs(); ++input) call.bytes += context->input(input).TotalBytes();
  call.run = [this, context](Context& chorus, std::span<const negotiation::Description* const> everyone) {
    collective(chorus, context, everyone);
  };
  call.done = [this, context, done = std::move(done)](std::exception_ptr failure) {
    if (failure) context->SetStatus(status_of(std::move(failure), what()));
    done();
  };
  shared->negotiator.submit(std::move(call));
}

}  // namespace chorus::tensorflow_ops
