// The Contexts the op library's kernels run on, and the thread each one's
// collectives run on.
//
// How a kernel finds the Python side's chorus.Context: chorus.tensorflow
// asks the Context for a capsule holding a copy of its std::shared_ptr
// (chorus.Context._shared_context(), python/context.cc), hands the pointer
// inside to chorus_tensorflow_adopt_context() through ctypes, and gets an
// integer handle back. Every op carries that handle as its `context`
// attribute. A handle, not the pointer itself, because TensorFlow caches
// kernels by their attributes: a handle is never reused, so a kernel made
// for a Context that was shut down can never run on a later one that
// happens to sit at the same address. Both halves link the one libchorus,
// so the shared_ptr copied across is the same type on both sides.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "chorus/context.h"

namespace chorus::tensorflow_ops {

// Runs jobs one after another on its own thread, in the order posted: the
// order TensorFlow issued the ops, which is the order chorus needs on every
// rank. TensorFlow's inter-op threads only post.
class SerialWorker {
 public:
  SerialWorker();
  // Finishes the jobs already posted, then joins.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;
  void post(std::function<void()> job);
  // Runs `job` on the calling thread instead, when no job is queued or
  // running (a job posted meanwhile waits for it, so the order holds);
  // false, with nothing run, otherwise. For small messages: the hand-off to
  // the worker and back costs more than the collective itself.
  bool run_here_if_idle(const std::function<void()>& job);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool running_ = false;  // a job runs, on the worker or on a caller's thread
  bool stopping_ = false;
  std::thread thread_;
};

struct SharedContext {
  explicit SharedContext(std::shared_ptr<Context> shared) : context(std::move(shared)) {}
  std::shared_ptr<Context> context;
  SerialWorker worker;
};

// The Context registered under `handle`, or null once released (or never adopted).
std::shared_ptr<SharedContext> find_context(int64_t handle);

}  // namespace chorus::tensorflow_ops

// What chorus.tensorflow calls through ctypes. `shared_context` points at a
// std::shared_ptr<chorus::Context> (the capsule's content), which is copied.
extern "C" {
__attribute__((visibility("default"))) int64_t chorus_tensorflow_adopt_context(const void* shared_context);
// Forgets the handle; its worker finishes what was posted first.
__attribute__((visibility("default"))) void chorus_tensorflow_release_context(int64_t handle);
}
