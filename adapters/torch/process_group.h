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

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "adapters/torch/compat.h"
#include "adapters/torch/work.h"
#include "chorus/collectives.h"
#include "chorus/context.h"

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

  // Coalesced calls are one fused chorus collective over all their tensors
  // (process_group_coalesced.cc), never a loop of calls.
  c10::intrusive_ptr<TorchWork> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<TorchWork> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
#if CHORUS_TORCH_HAS_TENSOR_COALESCED
  c10::intrusive_ptr<TorchWork> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<TorchWork> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
#endif
#if TORCH_VERSION_MAJOR >= 2
  c10::intrusive_ptr<TorchWork> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                 const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
#endif
  // The number of collectives this group issued: the same on every rank,
  // since every rank issues them in the same order (torch compares them
  // across ranks to find desynchronized groups). Every rank starts at 0, so
  // there is nothing to agree on first.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }
  // Rank 0 hears from every other rank within the timeout and names those it
  // did not (monitored_barrier.cc).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks = false) override;
  c10::intrusive_ptr<TorchWork> send(std::vector<at::Tensor>& tensors, int destination, int tag) override;
  c10::intrusive_ptr<TorchWork> recv(std::vector<at::Tensor>& tensors, int source, int tag) override;
  // The first message with `tag` from any rank of the group (chorus's
  // recv_any); the Work's sourceRank() names the sender once it finished.
  c10::intrusive_ptr<TorchWork> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  // A Work for `collective` on this rank ("allreduce on rank 1 of 3"), on
  // the one device of its outputs and inputs (else InvalidArgument).
  c10::intrusive_ptr<ChorusWork> make_work(c10d::OpType type, const char* collective,
                                           std::vector<at::Tensor> outputs,
                                           const std::vector<at::Tensor>& inputs = {}, int source_rank = -1) const;
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
  // The call's options: the memory and stream of its tensors, the group's
  // timeout unless torch passed one.
  CollectiveOptions options(const Placement& placement, std::chrono::milliseconds timeout) const;
  // A sparse COO tensor summed over the group as gloo does it: every rank's
  // indices and values gathered, then coalesced (process_group_coalesced.cc).
  c10::intrusive_ptr<TorchWork> allreduce_sparse_tensor(const at::Tensor& tensor, const c10d::AllreduceOptions& opts);
  // `root` as a rank of this group (InvalidArgument naming `what`, "root" or "peer", if it is not one).
  int root_of(int64_t root, const char* collective, const char* what = "root") const;

  std::chrono::milliseconds timeout_;
  std::shared_ptr<Context> context_;
  Completer completer_;
  uint32_t monitored_barriers_ = 0;  // numbers each monitored barrier's messages
  mutable std::atomic<uint64_t> sequence_{0};  // collectives issued (make_work counts them)
};

}  // namespace chorus::torch_backend
