#include "python/tensorflow/context_registry.h"

#include <map>
#include <utility>

namespace chorus::tensorflow_ops {

SerialWorker::SerialWorker() : thread_([this] { loop(); }) {}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void SerialWorker::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

bool SerialWorker::run_here_if_idle(const std::function<void()>& job) {
  {
    std::lock_guard lock(mutex_);
    if (running_ || !jobs_.empty() || stopping_) return false;
    running_ = true;
  }
  job();
  {
    std::lock_guard lock(mutex_);
    running_ = false;
  }
  wake_.notify_one();
  return true;
}

void SerialWorker::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return !running_ && (stopping_ || !jobs_.empty()); });
    if (jobs_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    lock.unlock();
    job();
    lock.lock();
    running_ = false;
  }
}

namespace {

struct Registry {
  std::mutex mutex;
  int64_t next_handle = 1;
  std::map<int64_t, std::shared_ptr<SharedContext>> contexts;
};

// Never destroyed: a kernel may still look a handle up while the process
// exits, after static destructors ran. chorus.tensorflow releases its
// handles itself (shutdown, and at exit).
Registry& registry() {
  static Registry* const instance = new Registry;
  return *instance;
}

}  // namespace

std::shared_ptr<SharedContext> find_context(int64_t handle) {
  Registry& all = registry();
  std::lock_guard lock(all.mutex);
  const auto found = all.contexts.find(handle);
  return found == all.contexts.end() ? nullptr : found->second;
}

}  // namespace chorus::tensorflow_ops

using chorus::tensorflow_ops::SharedContext;

int64_t chorus_tensorflow_adopt_context(const void* shared_context) {
  auto context = *static_cast<const std::shared_ptr<chorus::Context>*>(shared_context);
  auto shared = std::make_shared<SharedContext>(std::move(context));
  auto& all = chorus::tensorflow_ops::registry();
  std::lock_guard lock(all.mutex);
  const int64_t handle = all.next_handle++;
  all.contexts.emplace(handle, std::move(shared));
  return handle;
}

void chorus_tensorflow_release_context(int64_t handle) {
  std::shared_ptr<SharedContext> released;
  {
    auto& all = chorus::tensorflow_ops::registry();
    std::lock_guard lock(all.mutex);
    const auto found = all.contexts.find(handle);
    if (found == all.contexts.end()) return;
    released = std::move(found->second);
    all.contexts.erase(found);
  }
  // Outside the lock: the last reference joins the worker.
}
