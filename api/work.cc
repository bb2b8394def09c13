#include "chorus/work.h"

#include <algorithm>
#include <thread>

#include "api/work_queue.h"
#include "base/error.h"

namespace chorus {

namespace {

// Counts the time from construction to destruction as the caller's waiting.
class WaitClock {
 public:
  explicit WaitClock(const detail::WorkState& state) : telemetry_(state.telemetry.get()) {}
  ~WaitClock() {
    if (telemetry_) telemetry_->count_waiting(std::chrono::steady_clock::now() - started_);
  }
  WaitClock(const WaitClock&) = delete;
  WaitClock& operator=(const WaitClock&) = delete;

 private:
  algorithms::Telemetry* telemetry_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace

namespace detail {

void WorkState::finish(std::exception_ptr outcome) {
  std::lock_guard<std::mutex> lock(mutex);
  error = std::move(outcome);
  finished = true;
  finished_cv.notify_all();
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::shared_ptr<WorkState> WorkQueue::submit(std::function<void()> task) {
  auto state = std::make_shared<WorkState>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.emplace_back(std::move(task), state);
    ++unfinished_;
    unfinished_fast_.store(unfinished_, std::memory_order_release);
    if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
  return state;
}

void WorkQueue::drain() {
  // The common case, a blocking collective after blocking collectives.
  if (unfinished_fast_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return unfinished_ == 0; });
}

void WorkQueue::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping and nothing left
    auto [task, state] = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    std::exception_ptr outcome;
    try {
      task();
    } catch (...) {
      outcome = std::current_exception();
    }
    state->finish(outcome);
    lock.lock();
    --unfinished_;
    unfinished_fast_.store(unfinished_, std::memory_order_release);
    changed_.notify_all();
  }
}

}  // namespace detail

void Work::wait() {
  if (!state_) throw InvalidArgument("Work::wait on an empty Work (no collective was issued)");
  WaitClock clock(*state_);
  if (state_->drive) state_->drive(true);
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->finished_cv.wait(lock, [&] { return state_->finished; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::wait_for(std::chrono::milliseconds timeout) {
  if (!state_) throw InvalidArgument("Work::wait_for on an empty Work (no collective was issued)");
  WaitClock clock(*state_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (state_->drive) {
    // Point-to-point work finishes only when a caller drives its request, and
    // the transport that completes it does not signal finished_cv: poll.
    constexpr auto poll_interval = std::chrono::microseconds(50);
    for (;;) {
      state_->drive(false);
      {
        std::lock_guard<std::mutex> lock(state_->mutex);
        if (state_->finished) break;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(deadline - now, poll_interval));
    }
  }
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (!state_->finished_cv.wait_until(lock, deadline, [&] { return state_->finished; })) return false;
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

bool Work::test() const {
  if (!state_) return false;
  if (state_->drive) state_->drive(false);
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->finished;
}

std::exception_ptr Work::exception() const {
  if (!state_) return nullptr;
  if (state_->drive) state_->drive(false);
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->error;
}

int Work::source_rank() const {
  if (!state_) return -1;
  if (state_->drive) state_->drive(false);
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->finished && !state_->error ? state_->source_rank : -1;
}

}  // namespace chorus
