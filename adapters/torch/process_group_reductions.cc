// The collectives that reduce: allreduce, reduce, reduce_scatter (lists and
// flat tensors). AVG is chorus's own avg (sum, then one division in the
// tensor's type), never emulated here.
#include <ATen/ATen.h>

#include "adapters/torch/process_group.h"
#include "adapters/torch/tensors.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::torch_backend {

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].is_sparse()) return allreduce_sparse_tensor(tensors[0], opts);
  const at::Tensor& tensor = single(tensors, "allreduce", "", getRank());
  const Elements elements = reduction_elements(tensor, "allreduce", getRank());
  const ReduceOp op = chorus_op_of(opts.reduceOp, "allreduce", getRank());
  auto work = make_work(c10d::OpType::ALLREDUCE, "allreduce", {tensor});
  at::Tensor buffer = work->staging().output(tensor);
  return issue(work, [&] {
    return allreduce_async(*context_, buffer.data_ptr(), buffer.data_ptr(), elements.count, elements.type, op,
                           options(work->placement(), opts.timeout));
  });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const at::Tensor& tensor = single(tensors, "reduce", "", getRank());
  const int root = root_of(opts.rootRank, "reduce");
  const Elements elements = reduction_elements(tensor, "reduce", getRank());
  const ReduceOp op = chorus_op_of(opts.reduceOp, "reduce", getRank());
  auto work = make_work(c10d::OpType::REDUCE, "reduce", {tensor});
  // In place on root; elsewhere the tensor is only read (and left as it was).
  at::Tensor buffer = getRank() == root ? work->staging().output(tensor) : work->staging().input(tensor);
  return issue(work, [&] {
    return reduce_async(*context_, buffer.data_ptr(), getRank() == root ? buffer.data_ptr() : nullptr, elements.count,
                        elements.type, op, root, options(work->placement(), opts.timeout));
  });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& output = single(outputs, "reduce_scatter", "output", getRank());
  if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(getSize())) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch reduce_scatter: expected one list of ", getSize(),
                              " input tensors (one per rank)"));
  }
  for (const at::Tensor& input : inputs[0]) expect_same_layout(input, output, "reduce_scatter", "an input", getRank());
  const Elements elements = reduction_elements(output, "reduce_scatter", getRank());
  const ReduceOp op = chorus_op_of(opts.reduceOp, "reduce_scatter", getRank());
  auto work = make_work(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", {output}, inputs[0]);
  // chorus wants the blocks in one buffer, in rank order.
  std::vector<at::Tensor> flat_inputs;
  for (const at::Tensor& input : inputs[0]) flat_inputs.push_back(input.reshape({-1}));
  at::Tensor flat = at::cat(flat_inputs);
  work->staging().keep(flat);
  at::Tensor buffer = work->staging().output(output);
  return issue(work, [&] {
    return reduce_scatter_async(*context_, flat.data_ptr(), buffer.data_ptr(), elements.count, elements.type, op,
                                options(work->placement(), opts.timeout));
  });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  expect_dense(output, "reduce_scatter_tensor", getRank());
  expect_dense(input, "reduce_scatter_tensor", getRank());
  if (input.scalar_type() != output.scalar_type() || input.numel() != output.numel() * getSize()) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch reduce_scatter_tensor: the input has ",
                              input.numel(), " elements of ", c10::toString(input.scalar_type()), ", expected ",
                              getSize(), " x the output's ", output.numel(), " of ",
                              c10::toString(output.scalar_type())));
  }
  const Elements elements = reduction_elements(output, "reduce_scatter_tensor", getRank());
  const ReduceOp op = chorus_op_of(opts.reduceOp, "reduce_scatter_tensor", getRank());
  auto work = make_work(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {output}, {input});
  at::Tensor in = work->staging().input(input);
  at::Tensor out = work->staging().output(output);
  // In place (the output is this rank's block of the input) chorus does
  // without a copy; any other overlap would finish the group.
  const bool in_place =
      static_cast<std::byte*>(in.data_ptr()) + static_cast<size_t>(getRank()) * out.nbytes() == out.data_ptr();
  if (!in_place && overlaps(in, out)) in = work->staging().input(input.clone());
  return issue(work, [&] {
    return reduce_scatter_async(*context_, in.data_ptr(), out.data_ptr(), elements.count, elements.type, op,
                                options(work->placement(), opts.timeout));
  });
}

}  // namespace chorus::torch_backend
