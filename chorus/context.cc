#include "chorus/context.h"

#include "chorus/error.h"
#include "chorus/log.h"
#include "chorus/work_queue.h"
#include "transport/transport.h"

namespace chorus {

Context::Context(int rank, int size, std::unique_ptr<transport::Device> device,
                 std::vector<std::unique_ptr<transport::Pair>> pairs, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout), device_(std::move(device)), pairs_(std::move(pairs)) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw InvalidArgument(cat("rank ", rank_, " is out of range for a context of size ", size_));
  if (static_cast<int>(pairs_.size()) != size_)
    throw InvalidArgument(cat("rank ", rank_, ": context of size ", size_, " needs one pair slot per rank, got ",
                              pairs_.size()));
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && !pairs_[peer])
      throw InvalidArgument(cat("rank ", rank_, ": no connection to peer rank ", peer));
  }
  if (!device_) throw InvalidArgument(cat("rank ", rank_, ": a context needs a transport device"));
}

// Members are destroyed in reverse order: the work queue (finishing queued
// collectives) goes before the pairs, which go before their device.
Context::~Context() = default;

transport::Pair& Context::pair(int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw InvalidArgument(cat("rank ", rank_, ": no pair to rank ", peer, " in a context of size ", size_));
  return *pairs_[peer];
}

void Context::abort(const std::string& reason) {
  CHORUS_LOG(warn, rank_, "context aborted: ", reason);
  if (device_) device_->abort(std::make_exception_ptr(Aborted(cat("rank ", rank_, ": ", reason))));
}

void Context::throw_if_failed() const {
  if (!device_) return;
  if (auto failure = device_->failure()) std::rethrow_exception(failure);
}

detail::WorkQueue& Context::work_queue() {
  std::call_once(work_queue_once_, [this] { work_queue_ = std::make_unique<detail::WorkQueue>(); });
  return *work_queue_;
}

}  // namespace chorus
