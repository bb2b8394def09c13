// A torch Work over a chorus Work, and the thread that completes them.
//
// torch waits on a collective two ways: Work::wait() (dist.all_reduce,
// req.wait()) and the Future of getFuture() (DDP's comm hooks chain the
// gradient division onto it and wait on that). The Future must complete
// without anybody calling wait(), so each process group has a Completer:
// one thread that takes its Works in issue order and finishes each (waits
// for chorus, copies results into non-contiguous or list outputs, marks the
// Future). wait() waits on chorus's Work itself, so a blocking call wakes
// when the collective is done rather than through that thread, and finishes
// the Work if it gets there first. Futures complete in issue order per
// group: a recv still waiting for its sender holds back the Futures of later
// calls (not their wait()).
#pragma once

#include <ATen/core/ivalue.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "adapters/torch/compat.h"
#include "adapters/torch/placement.h"
#include "adapters/torch/tensors.h"
#include "chorus/work.h"

namespace chorus::torch_backend {

class ChorusWork : public TorchWork {
 public:
  // `what` ("allreduce on rank 1 of 2") prefixes every error; `outputs` are
  // the Future's value; `placement` is where the call's tensors live (a
  // Future of CUDA tensors names their device, or torch refuses to complete
  // it); `source_rank` is recv's peer (-1 otherwise).
  ChorusWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs, Placement placement,
             int source_rank = -1);
  ~ChorusWork() override;

  // Set before the Work is handed out (the call's buffers, its chorus Work).
  Staging& staging() { return staging_; }
  const std::string& what() const { return what_; }
  const Placement& placement() const { return placement_; }
  void start(chorus::Work work) { chorus_work_ = std::move(work); }

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  // Blocks until finished (at most `timeout` unless it is kNoTimeout);
  // throws the collective's error, prefixed with what failed on which rank.
  // For CUDA tensors the caller's current stream then waits for the copies
  // back, queued on the stream the call was made on.
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Waits for chorus, runs the staging's after-steps and completes the
  // Future, both on the call's stream for CUDA tensors. Idempotent; the
  // Completer's thread and waiters, concurrently.
  void finish();

 private:
  const std::string what_;
  const int source_rank_;
  std::vector<at::Tensor> outputs_;
  const Placement placement_;
  Staging staging_;
  chorus::Work chorus_work_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;

  mutable std::mutex state_mutex_;
  std::condition_variable finished_cv_;
  bool finishing_ = false;  // a thread is copying results and completing the Future
  bool finished_ = false;
  std::exception_ptr error_;
};

// `error` of the same chorus type (so Python sees chorus.PeerLostError with
// its .peer, and the rest), its message prefixed with "chorus.torch <what>
// failed: ".
std::exception_ptr with_context(std::exception_ptr error, const std::string& what);

class Completer {
 public:
  Completer();
  // Finishes every Work still queued (they fail fast once the Context has).
  ~Completer();
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;
  void submit(c10::intrusive_ptr<ChorusWork> work);
  // Returns once every Work submitted so far is finished and released.
  void drain();
  // Finishes what is queued and ends the thread (the destructor's work, for
  // an owner that must first let go of the GIL). Idempotent.
  void stop();

  // drain() on every live Completer. chorus.torch calls it at interpreter
  // exit (atexit, GIL released): a Completer that dropped the last reference
  // to a tensor after Python finalized would take the GIL in a dead
  // interpreter, which ends the thread by unwinding it, through noexcept
  // frames: std::terminate.
  static void drain_all();

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<c10::intrusive_ptr<ChorusWork>> queue_;
  bool busy_ = false;  // finishing a Work taken off the queue
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace chorus::torch_backend
