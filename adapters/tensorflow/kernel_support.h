// What every chorus kernel shares: TensorFlow's types in chorus's terms,
// chorus's errors as TensorFlow Statuses, and CollectiveKernel, the
// AsyncOpKernel whose call is matched with the other ranks' by the
// Context's Negotiator (adapters/negotiation/negotiator.h) before it runs.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "adapters/negotiation/description.h"
#include "base/types.h"
#include "chorus/context.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace chorus::tensorflow_ops {

namespace tf = ::tensorflow;

// chorus's type for reducing `type`; nullopt for the types chorus does not
// reduce (the ops that only move data move any type as bytes).
std::optional<DataType> reducible_type_of(tf::DataType type);
// The Status for a failure: chorus's error classes map to Unavailable (a
// lost peer), DeadlineExceeded (a timeout, a call ranks never all made),
// FailedPrecondition (ranks whose calls disagree, as Horovod reports it),
// InvalidArgument (a bad call), Aborted and Internal, with chorus's message
// (naming the rank and the cause) after "<op>: ".
absl::Status status_of(std::exception_ptr failure, const std::string& op);

// A Status that is not ok, thrown from a kernel's collective.
class KernelFailure : public std::exception {
 public:
  explicit KernelFailure(absl::Status status) : status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return "chorus kernel failure"; }

 private:
  absl::Status status_;
};
// Throws KernelFailure unless `status` is ok.
void check(const absl::Status& status);
// The elements of a tensor's first-axis row (1 for a vector or scalar).
size_t row_elements(const tf::TensorShape& shape);
// A tensor as the negotiation describes it: its type and dimensions.
negotiation::TensorDescription description_of(const tf::Tensor& tensor);
// Puts every input's bytes, end to end, into the description when they
// fit (negotiation::kLongestCarriedData): a small call then completes in
// its negotiation cycle, its result computed from everyone's data.
void carry_inputs(tf::OpKernelContext* context, negotiation::Description& description);
// True when every rank's description carries its data: every rank then
// computes the result from everyone's, alike, with no collective.
bool everyone_carries(std::span<const negotiation::Description* const> everyone);
// Rank `rank`'s carried data, which its description says is `bytes` long
// (MismatchError where it is not: not a chorus peer).
const std::byte* carried(const negotiation::Description& description, size_t bytes, size_t rank);

class CollectiveKernel : public tf::AsyncOpKernel {
 public:
  explicit CollectiveKernel(tf::OpKernelConstruction* construction);
  // Describes the call and submits it to the Context's Negotiator, which
  // runs collective() once every rank's matching call agrees (here, when
  // the call is small and nothing else is in flight; otherwise on the
  // Negotiator's thread) and then calls `done`.
  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) final;

 protected:
  // This rank's description of the call: kind, tensors, op, root, scale
  // factors; a refusal (with its reason) where the arguments are bad on
  // this rank. Name and matching are filled in by ComputeAsync.
  virtual void describe(const Context& chorus, tf::OpKernelContext* context,
                        negotiation::Description& description) = 0;
  // Runs once every rank agreed: allocates the outputs and makes the chorus
  // calls. `everyone` holds every rank's description, in rank order.
  // Fails by throwing (chorus's errors or KernelFailure).
  virtual void collective(Context& chorus, tf::OpKernelContext* context,
                          std::span<const negotiation::Description* const> everyone) = 0;
  // The name errors carry ("chorus allreduce").
  virtual std::string what() const = 0;
  // "rank 3: chorus allreduce: " and `reason`: how a refusal reads.
  std::string refusal(const Context& chorus, const std::string& reason) const;

 private:
  int64_t handle_ = 0;
  std::string tensor_name_;
  negotiation::Matching matching_ = negotiation::Matching::in_order;
};

}  // namespace chorus::tensorflow_ops
