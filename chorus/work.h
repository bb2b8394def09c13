// Handle to an asynchronous collective. Works on one Context complete in the
// order they were issued.
#pragma once

#include <chrono>
#include <exception>
#include <memory>

namespace chorus {
namespace detail {
struct WorkState;
}

class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}
  // Blocks until done; rethrows the collective's error.
  void wait();
  // Waits at most `timeout`: true once done (rethrowing the collective's
  // error, as wait), false if it is still running then.
  bool wait_for(std::chrono::milliseconds timeout);
  // True once finished (successfully or not); never blocks.
  bool test() const;
  // The error the collective finished with, or null (also while running).
  std::exception_ptr exception() const;
  bool valid() const { return state_ != nullptr; }
  // The rank the message of a receive from any peer (recv_any_async) came
  // from, once the Work finished successfully; -1 while it runs, after a
  // failure, and for every other kind of Work. Never blocks.
  int source_rank() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace chorus
