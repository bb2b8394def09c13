// Calls over many tensors at once: coalesced allreduce and allgather (torch's
// all_reduce_coalesced, all_gather_coalesced and _coalescing_manager) and the
// sparse allreduce. Each packs its tensors into one flat buffer and issues
// ONE chorus collective over it: the point of coalescing is one message per
// peer per step instead of one per tensor. The results are unpacked by the
// Work's after-steps once the collective finished.
#include <ATen/ATen.h>

#include "adapters/torch/process_group.h"
#include "adapters/torch/tensors.h"
#include "base/error.h"
#include "base/log.h"
#include "chorus/collectives_gather.h"

namespace chorus::torch_backend {

namespace {

// The dtype every tensor of a coalesced call shares: chorus reduces one type per call.
at::ScalarType common_type(const std::vector<at::Tensor>& tensors, const char* collective, int rank) {
  if (tensors.empty()) {
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": expected at least one tensor, got none"));
  }
  expect_one_device(tensors, collective, rank);
  for (const at::Tensor& tensor : tensors) {
    expect_dense(tensor, collective, rank);
    if (tensor.scalar_type() != tensors[0].scalar_type()) {
      throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": the tensors have types ",
                                c10::toString(tensors[0].scalar_type()), " and ", c10::toString(tensor.scalar_type()),
                                ", expected one type for all (one fused collective)"));
    }
  }
  return tensors[0].scalar_type();
}

// The tensors' elements end to end (a copy: coalesced tensors are separate allocations).
at::Tensor packed(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flats;
  flats.reserve(tensors.size());
  for (const at::Tensor& tensor : tensors) flats.push_back(tensor.reshape({-1}));
  return at::cat(flats);
}

#if CHORUS_TORCH_HAS_TENSOR_COALESCED
// Which side of a tensor-coalesced call holds the group's size times the other's elements.
enum class Larger { input, output };

// One output per input, of one type, each pair sized as `larger` says.
void expect_pairs(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, Larger larger,
                  const char* collective, int size, int rank) {
  common_type(inputs, collective, rank);
  if (outputs.size() != inputs.size()) {
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": ", outputs.size(), " outputs for ",
                              inputs.size(), " inputs, expected one each"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    expect_dense(outputs[i], collective, rank);
    const at::Tensor& big = larger == Larger::output ? outputs[i] : inputs[i];
    const at::Tensor& small = larger == Larger::output ? inputs[i] : outputs[i];
    if (outputs[i].scalar_type() != inputs[i].scalar_type() || big.numel() != small.numel() * size) {
      const char* big_name = larger == Larger::output ? "output" : "input";
      const char* small_name = larger == Larger::output ? "input" : "output";
      throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": ", big_name, " ", i, " has ",
                                big.numel(), " elements of ", c10::toString(big.scalar_type()), ", expected ", size,
                                " x its ", small_name, "'s ", small.numel(), " of ",
                                c10::toString(small.scalar_type())));
    }
  }
}

#endif

// Copies consecutive pieces of `flat`, from element `offset` on, into `targets`.
int64_t unpack(const at::Tensor& flat, int64_t offset, const std::vector<at::Tensor>& targets) {
  for (const at::Tensor& target : targets) {
    const int64_t count = target.numel();
    at::Tensor(target).copy_(flat.narrow(0, offset, count).view(target.sizes()));
    offset += count;
  }
  return offset;
}

}  // namespace

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  common_type(tensors, "allreduce_coalesced", getRank());
  at::Tensor flat = packed(tensors);
  const Elements elements = reduction_elements(flat, "allreduce_coalesced", getRank());
  const ReduceOp op = chorus_op_of(opts.reduceOp, "allreduce_coalesced", getRank());
  auto work = make_work(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors);
  work->staging().keep(flat);
  work->staging().after([flat, targets = tensors] { unpack(flat, 0, targets); });
  return issue(work, [&] {
    return allreduce_async(*context_, flat.data_ptr(), flat.data_ptr(), elements.count, elements.type, op,
                           options(work->placement(), opts.timeout));
  });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* collective = "allgather_coalesced";
  common_type(inputs, collective, getRank());
  if (output_lists.size() != static_cast<size_t>(getSize())) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch ", collective, ": ", output_lists.size(),
                              " output lists, expected one per rank (", getSize(), ")"));
  }
  for (const std::vector<at::Tensor>& outputs : output_lists) {
    if (outputs.size() != inputs.size()) {
      throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch ", collective, ": an output list holds ",
                                outputs.size(), " tensors, expected one per input (", inputs.size(), ")"));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      expect_same_layout(outputs[i], inputs[i], collective, "an output", getRank());
    }
  }
  at::Tensor flat_input = packed(inputs);
  at::Tensor flat_output = at::empty({flat_input.numel() * getSize()}, flat_input.options());
  std::vector<at::Tensor> outputs;
  for (const std::vector<at::Tensor>& list : output_lists) outputs.insert(outputs.end(), list.begin(), list.end());
  auto work = make_work(c10d::OpType::ALLGATHER_COALESCED, collective, outputs, inputs);
  work->staging().keep(flat_input);
  work->staging().keep(flat_output);
  // Rank r's block of the output is its inputs end to end, as the outputs of list r.
  work->staging().after([flat_output, outputs] { unpack(flat_output, 0, outputs); });
  const Elements elements = movement_elements(flat_input);
  return issue(work, [&] {
    return allgather_async(*context_, flat_input.data_ptr(), flat_output.data_ptr(), elements.count, elements.type,
                           options(work->placement(), opts.timeout));
  });
}

#if CHORUS_TORCH_HAS_TENSOR_COALESCED

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  const char* collective = "allgather_into_tensor_coalesced";
  expect_pairs(outputs, inputs, Larger::output, collective, getSize(), getRank());
  at::Tensor flat_input = packed(inputs);
  at::Tensor flat_output = at::empty({flat_input.numel() * getSize()}, flat_input.options());
  auto work = make_work(c10d::OpType::COALESCED, collective, outputs, inputs);
  work->staging().keep(flat_input);
  work->staging().keep(flat_output);
  // Rank r's block holds its inputs end to end; input i's piece of it is
  // block r of output i.
  work->staging().after([flat_output, outputs, size = getSize()] {
    int64_t offset = 0;
    for (int rank = 0; rank < size; ++rank) {
      for (const at::Tensor& output : outputs) {
        const int64_t count = output.numel() / size;
        at::Tensor(output).view({-1}).narrow(0, rank * count, count).copy_(flat_output.narrow(0, offset, count));
        offset += count;
      }
    }
  });
  const Elements elements = movement_elements(flat_input);
  return issue(work, [&] {
    return allgather_async(*context_, flat_input.data_ptr(), flat_output.data_ptr(), elements.count, elements.type,
                           options(work->placement(), opts.timeout));
  });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  const char* collective = "reduce_scatter_tensor_coalesced";
  expect_pairs(outputs, inputs, Larger::input, collective, getSize(), getRank());
  // chorus reduces rank r's block into rank r: block r is every input's
  // r-th piece, end to end.
  std::vector<at::Tensor> pieces;
  for (int rank = 0; rank < getSize(); ++rank) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int64_t count = outputs[i].numel();
      pieces.push_back(inputs[i].reshape({-1}).narrow(0, rank * count, count));
    }
  }
  at::Tensor flat_input = at::cat(pieces);
  at::Tensor flat_output = at::empty({flat_input.numel() / getSize()}, flat_input.options());
  const Elements elements = reduction_elements(flat_output, collective, getRank());
  const ReduceOp op = chorus_op_of(opts.reduceOp, collective, getRank());
  auto work = make_work(c10d::OpType::COALESCED, collective, outputs, inputs);
  work->staging().keep(flat_input);
  work->staging().keep(flat_output);
  work->staging().after([flat_output, outputs] { unpack(flat_output, 0, outputs); });
  return issue(work, [&] {
    return reduce_scatter_async(*context_, flat_input.data_ptr(), flat_output.data_ptr(), elements.count,
                                elements.type, op, options(work->placement(), opts.timeout));
  });
}

#endif  // CHORUS_TORCH_HAS_TENSOR_COALESCED

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<TorchWork> ChorusProcessGroup::allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                                   const c10d::AllreduceOptions& opts) {
  if (tensors.size() != 1 || !tensors[0].is_sparse()) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch allreduce_sparse: expected one sparse tensor, got ",
                              tensors.size(), tensors.size() == 1 ? " dense one" : ""));
  }
  return allreduce_sparse_tensor(tensors[0], opts);
}
#endif

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::allreduce_sparse_tensor(const at::Tensor& tensor,
                                                                          const c10d::AllreduceOptions& opts) {
  const char* collective = "sparse allreduce";
  if (!tensor.device().is_cpu()) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch ", collective, ": expected a CPU tensor, got one on ",
                              tensor.device().str()));
  }
  if (opts.reduceOp != c10d::ReduceOp::SUM) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch ", collective,
                              ": only SUM is defined for sparse tensors (as in gloo)"));
  }
  // Summing sparse tensors is concatenating their entries: every rank
  // gathers every rank's indices and values, then coalesces (adds the
  // entries at equal indices), as gloo does. The entry counts differ per
  // rank, so they are gathered first.
  at::Tensor local = tensor.coalesce();
  at::Tensor indices = local.indices().contiguous();
  at::Tensor values = local.values().contiguous();
  const int64_t sparse_dims = indices.size(0);
  const int64_t value_elements = values.numel() / std::max<int64_t>(local._nnz(), 1);
  at::Tensor counts = at::empty({getSize()}, at::kLong);
  int64_t nnz = local._nnz();
  chorus::allgather(*context_, &nnz, counts.data_ptr(), 1, DataType::int64, options(Placement{}, opts.timeout));
  std::vector<size_t> index_counts, value_counts;
  int64_t total = 0;
  for (int rank = 0; rank < getSize(); ++rank) {
    const int64_t entries = counts[rank].item<int64_t>();
    if (entries < 0) {
      throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch ", collective, ": rank ", rank, " sent ", entries,
                                " entries"));
    }
    total += entries;
    index_counts.push_back(static_cast<size_t>(entries * sparse_dims));
    value_counts.push_back(static_cast<size_t>(entries * value_elements));
  }
  // Gathered entry by entry, then laid out as sparse_coo_tensor wants them
  // (indices as [sparse_dims, total]).
  at::Tensor all_indices = at::empty({total, sparse_dims}, at::kLong);
  std::vector<int64_t> value_shape = values.sizes().vec();
  value_shape[0] = total;
  at::Tensor all_values = at::empty(value_shape, values.options());
  at::Tensor my_indices = indices.t().contiguous();
  chorus::allgatherv(*context_, my_indices.data_ptr(), all_indices.data_ptr(), index_counts, DataType::int64,
             options(Placement{}, opts.timeout));
  const Elements elements = movement_elements(values);
  const size_t element_scale = elements.count / std::max<size_t>(static_cast<size_t>(values.numel()), 1);
  if (element_scale > 1) {
    for (size_t& count : value_counts) count *= element_scale;
  }
  auto work = make_work(c10d::OpType::ALLREDUCE, collective, {tensor});
  work->staging().keep(values);
  work->staging().keep(all_values);
  work->staging().after([target = tensor, all_indices, all_values, sizes = tensor.sizes().vec()] {
    at::Tensor sum = at::sparse_coo_tensor(all_indices.t(), all_values, sizes).coalesce();
    at::Tensor(target).copy_(sum);
  });
  return issue(work, [&] {
    return allgatherv_async(*context_, values.data_ptr(), all_values.data_ptr(), value_counts, elements.type,
                            options(work->placement(), opts.timeout));
  });
}

}  // namespace chorus::torch_backend
