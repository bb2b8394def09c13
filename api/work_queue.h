// Runs a Context's asynchronous collectives, one after another, on one worker
// thread. Running them in issue order is what keeps every rank's sequence of
// messages identical; a blocking collective first drains the queue for the
// same reason. Internal (not installed).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "algorithms/execution/telemetry.h"

namespace chorus::detail {

struct WorkState {
  std::mutex mutex;
  std::condition_variable finished_cv;
  bool finished = false;
  std::exception_ptr error;
  // Where the message of a receive from any peer came from (Work::source_rank); -1 otherwise.
  int source_rank = -1;
  // Set for work that no queue runs (point-to-point): Work::wait/test/
  // exception call it first so the caller's thread finishes it; `blocking`
  // says whether it may wait for the transport.
  std::function<void(bool blocking)> drive;
  // Where the time a caller spends in Work::wait is counted (the Context's
  // counters, kept alive by the Work); null: nowhere.
  std::shared_ptr<algorithms::Telemetry> telemetry;

  void finish(std::exception_ptr outcome);
};

class WorkQueue {
 public:
  WorkQueue() = default;
  // Runs what is queued (it fails fast if the Context was aborted), then joins.
  ~WorkQueue();
  std::shared_ptr<WorkState> submit(std::function<void()> task);
  // Returns once every task submitted so far has finished.
  void drain();
  // Whether nothing is queued or running (without the lock).
  bool idle() const { return unfinished_fast_.load(std::memory_order_acquire) == 0; }

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<WorkState>>> tasks_;
  size_t unfinished_ = 0;
  std::atomic<size_t> unfinished_fast_{0};  // unfinished_, readable without the lock
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace chorus::detail
