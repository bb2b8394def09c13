#include "adapters/torch/work.h"

#include <ATen/core/jit_type.h>
#include <c10/core/StreamGuard.h>

#include <optional>
#include <set>
#include <utility>

#include "base/error.h"
#include "base/log.h"

namespace chorus::torch_backend {

namespace {

c10::intrusive_ptr<c10::ivalue::Future> future_for(const Placement& placement) {
  c10::TypePtr tensors = c10::ListType::create(c10::TensorType::get());
  if (!placement.on_cuda()) return c10::make_intrusive<c10::ivalue::Future>(tensors);
  return c10::make_intrusive<c10::ivalue::Future>(tensors, std::vector<c10::Device>{placement.device});
}

}  // namespace

ChorusWork::ChorusWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
                       Placement placement, int source_rank)
    : TorchWork(rank, type),
      what_(std::move(what)),
      source_rank_(source_rank),
      outputs_(std::move(outputs)),
      placement_(std::move(placement)),
      future_(future_for(placement_)) {}

ChorusWork::~ChorusWork() {
  // Never hand buffers back while chorus may still write them.
  try {
    finish();
  } catch (...) {  // finish() stores errors, it does not throw; be safe in a destructor
  }
}

std::exception_ptr with_context(std::exception_ptr error, const std::string& what) {
  const std::string prefix = "chorus.torch " + what + " failed: ";
  try {
    std::rethrow_exception(error);
  } catch (const PeerLostError& e) {
    return std::make_exception_ptr(PeerLostError(prefix + e.what(), e.peer_rank()));
  } catch (const IoError& e) {
    return std::make_exception_ptr(IoError(prefix + e.what(), e.peer_rank()));
  } catch (const TimeoutError& e) {
    // " Timed out " is what torch's tests and tools look for in a
    // backend's timeout (gloo's words); chorus's own follow.
    return std::make_exception_ptr(TimeoutError(prefix + "Timed out (" + e.what() + ")"));
  } catch (const InvalidArgument& e) {
    return std::make_exception_ptr(InvalidArgument(prefix + e.what()));
  } catch (const MismatchError& e) {
    return std::make_exception_ptr(MismatchError(prefix + e.what()));
  } catch (const Aborted& e) {
    return std::make_exception_ptr(Aborted(prefix + e.what()));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(Error(prefix + e.what()));
  } catch (...) {
    return std::make_exception_ptr(Error(prefix + "an unknown exception"));
  }
}

void ChorusWork::finish() {
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (finished_) return;
  }
  // Every thread here waits on chorus's Work itself (it takes any number of
  // waiters): a caller of wait() wakes when the collective is done, not
  // after the Completer's thread has woken and finished the Work for it.
  std::exception_ptr error;
  try {
    // Invalid only when issuing the collective threw (the caller saw that).
    if (!chorus_work_.valid()) throw Aborted("the collective was never issued");
    chorus_work_.wait();
  } catch (...) {
    error = with_context(std::current_exception(), what_);
  }
  {
    // The first thread back copies the results and completes the Future.
    std::unique_lock<std::mutex> lock(state_mutex_);
    if (finishing_) {
      finished_cv_.wait(lock, [&] { return finished_; });
      return;
    }
    finishing_ = true;
  }
  // The copies back and the Future's events (markCompleted records them on
  // the current stream, and whoever uses the Future waits for them) go on
  // the call's stream: after the result, before anything the caller queues
  // once wait() returned.
  std::optional<c10::StreamGuard> on_call_stream;
  if (placement_.stream) on_call_stream.emplace(*placement_.stream);
  if (!error) {
    try {
      staging_.finish();
    } catch (...) {
      error = with_context(std::current_exception(), what_);
    }
  }
  staging_.drop();
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    finished_ = true;
    error_ = error;
  }
  finished_cv_.notify_all();
  // Callbacks chained on the Future (DDP's gradient division) run here.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool ChorusWork::isCompleted() {
  std::lock_guard<std::mutex> lock(state_mutex_);
  return finished_;
}

bool ChorusWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(state_mutex_);
  return finished_ && !error_;
}

std::exception_ptr ChorusWork::exception() const {
  std::lock_guard<std::mutex> lock(state_mutex_);
  return error_;
}

int ChorusWork::sourceRank() const {
  if (source_rank_ >= 0) return source_rank_;
  // A receive from any source learns its sender when it finishes.
  std::lock_guard<std::mutex> lock(state_mutex_);
  if (finished_ && !error_ && chorus_work_.valid() && chorus_work_.source_rank() >= 0) {
    return chorus_work_.source_rank();
  }
  return TorchWork::sourceRank();
}

std::vector<at::Tensor> ChorusWork::result() { return outputs_; }

bool ChorusWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    finish();
  } else {
    // A bounded wait leaves the finishing to the Completer: chorus's own
    // timeout (the group's) bounds the collective itself.
    std::unique_lock<std::mutex> lock(state_mutex_);
    if (!finished_cv_.wait_for(lock, timeout, [&] { return finished_; })) {
      throw TimeoutError(cat("chorus.torch ", what_, ": not finished after waiting ", timeout.count(), " ms"));
    }
  }
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (error_) std::rethrow_exception(error_);
  }
  // As NCCL's wait(): whatever stream the caller is on now sees the result.
  order_current_stream_after(placement_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> ChorusWork::getFuture() { return future_; }

namespace {

// Every live Completer, for drain_all().
std::mutex registry_mutex;
std::set<Completer*>& registry() {
  static auto* completers = new std::set<Completer*>();  // never destroyed: used until exit
  return *completers;
}

}  // namespace

Completer::Completer() : thread_([this] { run(); }) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().insert(this);
}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry().erase(this);
  }
  stop();
}

void Completer::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Completer::submit(c10::intrusive_ptr<ChorusWork> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  changed_.notify_all();
}

void Completer::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void Completer::drain_all() {
  // Holding the registry's lock keeps every Completer alive meanwhile.
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (Completer* completer : registry()) completer->drain();
}

void Completer::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    c10::intrusive_ptr<ChorusWork> work = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    work->finish();
    work.reset();  // the last reference may be ours: drop it outside the lock
    lock.lock();
    busy_ = false;
    changed_.notify_all();  // drain() waits for an empty queue and no Work in hand
  }
}

}  // namespace chorus::torch_backend
