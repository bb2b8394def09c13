#include "python/tensorflow/kernel_support.h"

#include <functional>
#include <utility>

#include "base/error.h"
#include "python/tensorflow/context_registry.h"

namespace chorus::tensorflow_ops {

std::optional<DataType> chorus_type_of(tf::DataType type) {
  switch (type) {
    case tf::DT_INT8: return DataType::int8;
    case tf::DT_UINT8: return DataType::uint8;
    case tf::DT_BOOL: return DataType::uint8;
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

absl::Status status_of_current_exception(const std::string& op) {
  try {
    throw;
  } catch (const KernelFailure& failure) {
    return failure.status();
  } catch (const IoError& error) {
    // PeerLostError among them: the peer's rank is in the message.
    return absl::UnavailableError(op + ": " + error.what());
  } catch (const TimeoutError& error) {
    return absl::DeadlineExceededError(op + ": " + error.what());
  } catch (const InvalidArgument& error) {
    return absl::InvalidArgumentError(op + ": " + error.what());
  } catch (const MismatchError& error) {
    return absl::InvalidArgumentError(op + ": " + error.what());
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

void fail_everywhere(Context& chorus, const std::string& message) {
  chorus.abort(message);
  throw KernelFailure(absl::InvalidArgumentError(message));
}

size_t row_elements(const tf::TensorShape& shape) {
  size_t elements = 1;
  for (int axis = 1; axis < shape.dims(); ++axis) elements *= static_cast<size_t>(shape.dim_size(axis));
  return elements;
}


CollectiveKernel::CollectiveKernel(tf::OpKernelConstruction* construction) : AsyncOpKernel(construction) {
  OP_REQUIRES_OK(construction, construction->GetAttr("context", &handle_));
}

void CollectiveKernel::ComputeAsync(tf::OpKernelContext* context, DoneCallback done) {
  const std::shared_ptr<SharedContext> shared = find_context(handle_);
  OP_REQUIRES_ASYNC(context, shared != nullptr,
                    absl::FailedPreconditionError(what() + ": chorus context handle " + std::to_string(handle_) +
                                                  " is not open (chorus.tensorflow.shutdown() ran, or init() "
                                                  "did not); call chorus.tensorflow.init() first"),
                    done);
  const tf::DataType tensor_type = context->input(0).dtype();
  const std::optional<DataType> type = chorus_type_of(tensor_type);
  OP_REQUIRES_ASYNC(context, type.has_value(),
                    absl::InvalidArgumentError(what() + ": chorus does not move " + tf::DataTypeString(tensor_type)),
                    done);
  // The job holds the Context, not the SharedContext: the worker must
  // never drop the last reference to itself.
  std::function<void()> job = [this, context, done = std::move(done), chorus = shared->context, type = *type] {
    try {
      collective(*chorus, context, type);
    } catch (...) {
      context->SetStatus(status_of_current_exception(what()));
    }
    done();
  };
  // A small message runs on TensorFlow's thread when the worker is idle:
  // it blocks that thread only for a latency-sized call (the eager caller
  // waits for it anyway), and saves two thread hand-offs per op.
  if (context->input(0).TotalBytes() <= kRunHereMaxBytes && shared->worker.run_here_if_idle(job)) return;
  shared->worker.post(std::move(job));
}

}  // namespace chorus::tensorflow_ops
