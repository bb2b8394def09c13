// What every chorus kernel shares: the TensorFlow dtype as a chorus
// DataType, chorus's errors as TensorFlow Statuses, and CollectiveKernel,
// the AsyncOpKernel whose collective runs on its Context's worker thread.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "base/types.h"
#include "chorus/context.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace chorus::tensorflow_ops {

namespace tf = ::tensorflow;

// chorus's type for `type`; bool moves as uint8 (the ops that reduce do not take it).
std::optional<DataType> chorus_type_of(tf::DataType type);
// The Status for the exception being handled: chorus's error classes map to
// Unavailable (a lost peer), DeadlineExceeded, InvalidArgument (a bad or
// mismatched call), Aborted and Internal, chorus's message (naming the rank
// and cause) kept after "<op>: ".
absl::Status status_of_current_exception(const std::string& op);

// A Status that is not ok, thrown from a kernel's collective.
class KernelFailure : public std::exception {
 public:
  explicit KernelFailure(absl::Status status) : status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return "chorus kernel failure"; }

 private:
  absl::Status status_;
};
// A bad call found on this rank only: aborts the Context with `message`, so
// that the other ranks' calls fail naming it instead of waiting for this
// rank, and throws InvalidArgument here (as chorus does with the calls it
// rejects).
[[noreturn]] void fail_everywhere(Context& chorus, const std::string& message);
// Throws KernelFailure unless `status` is ok.
void check(const absl::Status& status);
// The elements of a tensor's first-axis row (1 for a vector or scalar).
size_t row_elements(const tf::TensorShape& shape);

// Ops whose first input is at most this run on the calling thread when
// their Context's worker is idle (SerialWorker::run_here_if_idle).
inline constexpr size_t kRunHereMaxBytes = size_t{64} << 10;

class CollectiveKernel : public tf::AsyncOpKernel {
 public:
  explicit CollectiveKernel(tf::OpKernelConstruction* construction);
  // Posts collective() to the worker of the op's Context and returns (or
  // runs it here: kRunHereMaxBytes).
  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) final;

 protected:
  // Runs on the worker thread (or the caller's): allocates outputs and makes the chorus
  // calls; fails by throwing (chorus's errors or KernelFailure).
  virtual void collective(Context& chorus, tf::OpKernelContext* context, DataType type) = 0;
  // The name errors carry ("chorus allreduce").
  virtual std::string what() const = 0;

 private:
  int64_t handle_ = 0;
};

}  // namespace chorus::tensorflow_ops
