// How the executor touches memory of one kind: the scratch a Plan needs,
// copies, reductions and the final averaging. The executor never calls new,
// memcpy or a reduction kernel itself; it asks the backend of the call's
// memory (memory/registry.h), so a device kind's backend (copies and kernels
// on a stream) slots in without touching the algorithms. Internal (not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <utility>

#include "base/log.h"
#include "base/memory.h"
#include "base/types.h"

namespace chorus {

class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  virtual Memory memory() const = 0;

  // At least `bytes` of scratch for one collective on the calling thread.
  // Reused by the thread's next collective on this backend, which is what
  // keeps a training loop from allocating (and page-faulting) every call.
  virtual std::byte* thread_scratch(size_t bytes) = 0;
  // A buffer of its own, for the rare call that needs a second copy of the
  // user's data; freed (by this backend's own means) when the last pointer goes.
  virtual std::shared_ptr<std::byte> allocate(size_t bytes) = 0;
  // memmove semantics: an in-place call may copy a region onto itself.
  virtual void copy(std::byte* to, const std::byte* from, size_t bytes) = 0;
  // accumulator[i] = accumulator[i] op operand[i] for i < count (avg sums).
  // The executor's reduce steps call these for a call checked once above
  // them: the pair is valid and the buffers are there (asserted, not checked).
  virtual void reduce(DataType type, ReduceOp op, std::byte* accumulator, const std::byte* operand,
                      size_t count) = 0;
  // Divides each of `count` elements by `ranks` (the end of an average).
  virtual void average(DataType type, std::byte* data, size_t count, size_t ranks) = 0;

  // Copies, reductions and averages issued by the calling thread between
  // begin_queueing() and finish_queued() may still be running when they
  // return, in the order issued; finish_queued() returns once all of them
  // are done. A device backend then waits once for a batch of kernels rather
  // than once per kernel: where processes share a GPU, each wait can cost a
  // turn of its time slice. Host memory works at once: both do nothing.
  virtual void begin_queueing() {}
  virtual void finish_queued() {}

  // Stream order without waits (the executor's stream-ordered path,
  // algorithms/execution/executor.cc): while queueing, a fence marks the
  // work the calling thread has queued so far, and fence_passed() says,
  // without waiting, whether all of it has ended, so the thread keeps
  // moving messages while a kernel runs instead of blocking on it. Fences
  // pass in the order recorded. A backend whose work ends as it returns
  // (host memory) offers none: orders_by_fences() is false and every fence
  // has passed.
  virtual bool orders_by_fences() const { return false; }
  virtual uint64_t record_fence() { return 0; }
  virtual bool fence_passed(uint64_t /*fence*/) { return true; }
};

// begin_queueing() for a scope. finish() waits for the batch; a scope left
// by an exception waits for it too, so no queued kernel touches the
// caller's buffers once the call has returned, and the thread's next
// operations on the backend wait each again. (A device backend keeps
// "queueing" per thread: left on after a failed call, the thread's next
// call would count a step done while its kernel still runs.)
class QueuedWork {
 public:
  // `rank` names the caller in the error logged if the unwinding wait fails.
  QueuedWork(MemoryBackend& backend, int rank) : backend_(&backend), rank_(rank) { backend.begin_queueing(); }
  QueuedWork(const QueuedWork&) = delete;
  QueuedWork& operator=(const QueuedWork&) = delete;
  ~QueuedWork() {
    if (!backend_) return;
    try {
      backend_->finish_queued();
    } catch (const std::exception& error) {
      CHORUS_LOG(error, rank_, "after a failed call, waiting for its queued work on ", to_string(backend_->memory()),
                 " failed too: ", error.what());
    }
  }
  // Waits for the batch; throws what the backend throws (once: the
  // destructor does not wait again).
  void finish() { std::exchange(backend_, nullptr)->finish_queued(); }

 private:
  MemoryBackend* backend_;
  int rank_;
};

}  // namespace chorus
