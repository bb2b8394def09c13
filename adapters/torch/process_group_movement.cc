// The collectives that move data without reducing it: allgather (lists and
// flat tensors), gather, scatter, alltoall (lists and alltoall_single with
// equal or given splits). Any dtype moves; chorus sees those it has no type
// for as bytes. Lists of tensors go through one flat buffer in rank order,
// which is what chorus takes, copied in or out around the call.
#include <ATen/ATen.h>

#include "adapters/torch/process_group.h"
#include "adapters/torch/tensors.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::torch_backend {

namespace {

// Copies block r of `flat` into targets[r] once the call has finished.
void scatter_blocks_after(Staging& staging, const at::Tensor& flat, const std::vector<at::Tensor>& targets) {
  staging.after([flat, targets]() mutable {
    int64_t offset = 0;
    for (const at::Tensor& target : targets) {
      const int64_t count = target.numel();
      target.copy_(flat.narrow(0, offset, count).view(target.sizes()));
      offset += count;
    }
  });
}

at::Tensor flat_of(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flats;
  flats.reserve(tensors.size());
  for (const at::Tensor& tensor : tensors) flats.push_back(tensor.reshape({-1}));
  return at::cat(flats);
}

}  // namespace

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  const at::Tensor& input = single(inputs, "allgather", "input", getRank());
  if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(getSize())) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch allgather: expected one list of ", getSize(),
                              " output tensors (one per rank)"));
  }
  for (const at::Tensor& output : outputs[0]) expect_same_layout(output, input, "allgather", "an output", getRank());
  auto work = make_work(c10d::OpType::ALLGATHER, "allgather", outputs[0], {input});
  at::Tensor in = work->staging().input(input);
  at::Tensor flat = at::empty({input.numel() * getSize()}, input.options().memory_format(at::MemoryFormat::Contiguous));
  work->staging().keep(flat);
  scatter_blocks_after(work->staging(), flat, outputs[0]);
  const Elements elements = movement_elements(in);
  return issue(work, [&] {
    return allgather_async(*context_, in.data_ptr(), flat.data_ptr(), elements.count, elements.type,
                           options(work->placement(), opts.timeout));
  });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  expect_dense(output, "all_gather_into_tensor", getRank());
  expect_dense(input, "all_gather_into_tensor", getRank());
  if (input.scalar_type() != output.scalar_type() || output.numel() != input.numel() * getSize()) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch all_gather_into_tensor: the output has ",
                              output.numel(), " elements of ", c10::toString(output.scalar_type()), ", expected ",
                              getSize(), " x the input's ", input.numel(), " of ", c10::toString(input.scalar_type())));
  }
  auto work = make_work(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {output}, {input});
  at::Tensor in = work->staging().input(input);
  at::Tensor out = work->staging().output(output);
  // In place (the input is this rank's block of the output) chorus does
  // without a copy; any other overlap would finish the group.
  const bool in_place =
      static_cast<std::byte*>(out.data_ptr()) + static_cast<size_t>(getRank()) * in.nbytes() == in.data_ptr();
  if (!in_place && overlaps(in, out)) in = work->staging().input(input.clone());
  const Elements elements = movement_elements(in);
  return issue(work, [&] {
    return allgather_async(*context_, in.data_ptr(), out.data_ptr(), elements.count, elements.type,
                           options(work->placement(), opts.timeout));
  });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  const at::Tensor& input = single(inputs, "gather", "input", getRank());
  const int root = root_of(opts.rootRank, "gather");
  const bool is_root = getRank() == root;
  if (is_root && (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(getSize()))) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch gather: root expected one list of ", getSize(),
                              " output tensors (one per rank)"));
  }
  if (!is_root && !outputs.empty() && !outputs[0].empty()) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch gather: only root ", root, " takes outputs"));
  }
  if (is_root) {
    for (const at::Tensor& output : outputs[0]) expect_same_layout(output, input, "gather", "an output", getRank());
  }
  auto work = make_work(c10d::OpType::GATHER, "gather", is_root ? outputs[0] : std::vector<at::Tensor>{}, {input});
  at::Tensor in = work->staging().input(input);
  at::Tensor flat;
  if (is_root) {
    flat = at::empty({input.numel() * getSize()}, input.options().memory_format(at::MemoryFormat::Contiguous));
    work->staging().keep(flat);
    scatter_blocks_after(work->staging(), flat, outputs[0]);
  }
  const Elements elements = movement_elements(in);
  return issue(work, [&] {
    return gather_async(*context_, in.data_ptr(), is_root ? flat.data_ptr() : nullptr, elements.count, elements.type,
                        root, options(work->placement(), opts.timeout));
  });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const at::Tensor& output = single(outputs, "scatter", "output", getRank());
  const int root = root_of(opts.rootRank, "scatter");
  const bool is_root = getRank() == root;
  if (is_root && (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(getSize()))) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch scatter: root expected one list of ", getSize(),
                              " input tensors (one per rank)"));
  }
  if (!is_root && !inputs.empty() && !inputs[0].empty()) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch scatter: only root ", root, " takes inputs"));
  }
  if (is_root) {
    for (const at::Tensor& input : inputs[0]) expect_same_layout(input, output, "scatter", "an input", getRank());
  }
  auto work = make_work(c10d::OpType::SCATTER, "scatter", {output}, is_root ? inputs[0] : std::vector<at::Tensor>{});
  at::Tensor flat;
  if (is_root) {
    flat = flat_of(inputs[0]);
    work->staging().keep(flat);
  }
  at::Tensor out = work->staging().output(output);
  const Elements elements = movement_elements(out);
  return issue(work, [&] {
    return scatter_async(*context_, is_root ? flat.data_ptr() : nullptr, out.data_ptr(), elements.count,
                         elements.type, root, options(work->placement(), opts.timeout));
  });
}

namespace {

// Element counts per rank for alltoall_single: torch splits along dim 0
// (rows); no splits means equal ones.
std::vector<size_t> counts_of(const at::Tensor& tensor, const std::vector<int64_t>& splits, int size, int rank,
                              const char* which) {
  const int64_t rows = tensor.dim() == 0 ? 1 : tensor.size(0);
  const int64_t row_elements = rows == 0 ? 0 : tensor.numel() / rows;
  std::vector<size_t> counts(static_cast<size_t>(size));
  if (splits.empty()) {
    if (rows % size != 0) {
      throw InvalidArgument(cat("rank ", rank, ": chorus.torch alltoall_single: the ", which, " has ", rows,
                                " rows, expected a multiple of the group size ", size, " (or give split sizes)"));
    }
    for (size_t& count : counts) count = static_cast<size_t>(rows / size * row_elements);
    return counts;
  }
  int64_t total = 0;
  for (int64_t split : splits) total += split;
  if (splits.size() != static_cast<size_t>(size) || total != rows) {
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch alltoall_single: ", splits.size(), " ", which,
                              " split sizes summing to ", total, ", expected ", size, " summing to its ", rows,
                              " rows"));
  }
  for (size_t peer = 0; peer < counts.size(); ++peer) {
    if (splits[peer] < 0) {
      throw InvalidArgument(cat("rank ", rank, ": chorus.torch alltoall_single: negative ", which, " split size"));
    }
    counts[peer] = static_cast<size_t>(splits[peer] * row_elements);
  }
  return counts;
}

// Moved as bytes, counts scale by the element size.
void scale_counts(std::vector<size_t>& counts, const at::Tensor& tensor, const Elements& elements) {
  if (elements.type == DataType::uint8 && tensor.scalar_type() != at::kByte) {
    for (size_t& count : counts) count *= static_cast<size_t>(tensor.element_size());
  }
}

}  // namespace

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& output_split_sizes,
                                                                std::vector<int64_t>& input_split_sizes,
                                                                const c10d::AllToAllOptions& opts) {
  expect_dense(output, "alltoall_single", getRank());
  expect_dense(input, "alltoall_single", getRank());
  if (input.scalar_type() != output.scalar_type()) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch alltoall_single: input of ",
                              c10::toString(input.scalar_type()), " but output of ",
                              c10::toString(output.scalar_type())));
  }
  std::vector<size_t> send_counts = counts_of(input, input_split_sizes, getSize(), getRank(), "input");
  std::vector<size_t> recv_counts = counts_of(output, output_split_sizes, getSize(), getRank(), "output");
  auto work = make_work(c10d::OpType::ALLTOALL_BASE, "alltoall_single", {output}, {input});
  at::Tensor in = work->staging().input(input);
  at::Tensor out = work->staging().output(output);
  // chorus's alltoall is out of place only.
  if (overlaps(in, out)) in = work->staging().input(input.clone());
  const Elements elements = movement_elements(in);
  scale_counts(send_counts, in, elements);
  scale_counts(recv_counts, in, elements);
  return issue(work, [&] {
    return alltoallv_async(*context_, in.data_ptr(), send_counts, out.data_ptr(), recv_counts, elements.type,
                           options(work->placement(), opts.timeout));
  });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  if (inputs.size() != static_cast<size_t>(getSize()) || outputs.size() != inputs.size()) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch alltoall: ", inputs.size(), " inputs and ",
                              outputs.size(), " outputs, expected ", getSize(), " of each (one per rank)"));
  }
  std::vector<size_t> send_counts;
  std::vector<size_t> recv_counts;
  for (size_t peer = 0; peer < inputs.size(); ++peer) {
    expect_dense(inputs[peer], "alltoall", getRank());
    expect_dense(outputs[peer], "alltoall", getRank());
    if (inputs[peer].scalar_type() != inputs[0].scalar_type() ||
        outputs[peer].scalar_type() != inputs[0].scalar_type()) {
      throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch alltoall: every tensor must have the dtype ",
                                c10::toString(inputs[0].scalar_type()), " of the first input"));
    }
    send_counts.push_back(static_cast<size_t>(inputs[peer].numel()));
    recv_counts.push_back(static_cast<size_t>(outputs[peer].numel()));
  }
  auto work = make_work(c10d::OpType::ALLTOALL, "alltoall", outputs, inputs);
  at::Tensor flat_in = flat_of(inputs);
  size_t received = 0;
  for (size_t count : recv_counts) received += count;
  at::Tensor flat_out = at::empty({static_cast<int64_t>(received)}, flat_in.options());
  work->staging().keep(flat_in);
  work->staging().keep(flat_out);
  scatter_blocks_after(work->staging(), flat_out, outputs);
  const Elements elements = movement_elements(flat_in);
  scale_counts(send_counts, flat_in, elements);
  scale_counts(recv_counts, flat_in, elements);
  return issue(work, [&] {
    return alltoallv_async(*context_, flat_in.data_ptr(), send_counts, flat_out.data_ptr(), recv_counts,
                           elements.type, options(work->placement(), opts.timeout));
  });
}

}  // namespace chorus::torch_backend
