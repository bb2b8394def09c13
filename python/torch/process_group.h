// The torch.distributed backend "chorus": c10d's collectives on a chorus
// Context. One Context per process group, connected over the store torch
// hands the backend (a prefix of the job's store per group), so new_group
// works for any subset of ranks, with the group's own rank numbering and
// timeout, without the ranks outside it taking part.
//
// Every call is asynchronous: it checks its tensors, issues the chorus
// collective and returns a ChorusWork that the group's Completer finishes.
// Calls are issued in program order, which is the order chorus requires on
// every rank.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "chorus/collectives.h"
#include "chorus/context.h"
#include "python/torch/compat.h"
#include "python/torch/work.h"

namespace chorus::torch_backend {

class ChorusProcessGroup : public BackendBase {
 public:
  // Collective with the group's other ranks: connects them (within `timeout`).
  ChorusProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  ~ChorusProcessGroup() override;

  const std::string getBackendName() const override { return "chorus"; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  Context& context() { return *context_; }

  c10::intrusive_ptr<TorchWork> broadcast(std::vector<at::Tensor>& tensors,
                                          const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<TorchWork> allreduce(std::vector<at::Tensor>& tensors,
                                          const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<TorchWork> reduce(std::vector<at::Tensor>& tensors,
                                       const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<TorchWork> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<TorchWork> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<TorchWork> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                       const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<TorchWork> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                        const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<TorchWork> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<TorchWork> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<TorchWork> alltoall_base(at::Tensor& output, at::Tensor& input,
                                              std::vector<int64_t>& output_split_sizes,
                                              std::vector<int64_t>& input_split_sizes,
                                              const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<TorchWork> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                         const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<TorchWork> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  c10::intrusive_ptr<TorchWork> send(std::vector<at::Tensor>& tensors, int destination, int tag) override;
  c10::intrusive_ptr<TorchWork> recv(std::vector<at::Tensor>& tensors, int source, int tag) override;

 private:
  // A Work for `collective` on this rank ("allreduce on rank 1 of 3").
  c10::intrusive_ptr<ChorusWork> make_work(c10d::OpType type, const char* collective,
                                           std::vector<at::Tensor> outputs, int source_rank = -1) const;
  // Issues the chorus call (`start` returns its Work) for `work` and queues
  // it for the Completer. Issuing throws only for a Context that has already
  // failed (a lost peer): the error then names the call as well as the peer.
  template <class Start>
  c10::intrusive_ptr<TorchWork> issue(const c10::intrusive_ptr<ChorusWork>& work, Start&& start) {
    chorus::Work started;
    try {
      started = start();
    } catch (...) {
      std::rethrow_exception(with_context(std::current_exception(), work->what()));
    }
    work->start(std::move(started));
    completer_.submit(work);
    return work;
  }
  // The call's options: the group's timeout unless torch passed one.
  CollectiveOptions options(std::chrono::milliseconds timeout) const;
  // `root` as a rank of this group (InvalidArgument naming `what`, "root" or "peer", if it is not one).
  int root_of(int64_t root, const char* collective, const char* what = "root") const;

  std::chrono::milliseconds timeout_;
  std::shared_ptr<Context> context_;
  Completer completer_;
};

}  // namespace chorus::torch_backend
