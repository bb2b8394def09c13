#include "chorus/context.h"

#include "base/error.h"
#include "base/log.h"
#include "chorus/work_queue.h"
#include "transport/transport.h"

namespace chorus {

namespace {

std::vector<std::vector<std::unique_ptr<transport::Pair>>> one_stream(
    std::vector<std::unique_ptr<transport::Pair>> pairs) {
  std::vector<std::vector<std::unique_ptr<transport::Pair>>> streams;
  streams.push_back(std::move(pairs));
  return streams;
}

}  // namespace

Context::Context(int rank, int size, std::unique_ptr<transport::Device> device,
                 std::vector<std::unique_ptr<transport::Pair>> pairs, std::chrono::milliseconds timeout)
    : Context(rank, size, std::move(device), one_stream(std::move(pairs)), timeout) {}

Context::Context(int rank, int size, std::unique_ptr<transport::Device> device,
                 std::vector<std::vector<std::unique_ptr<transport::Pair>>> pairs, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout), device_(std::move(device)), pairs_(std::move(pairs)) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw InvalidArgument(cat("rank ", rank_, " is out of range for a context of size ", size_));
  if (pairs_.empty() || static_cast<int>(pairs_.size()) > kMaxStreams)
    throw InvalidArgument(cat("rank ", rank_, ": a context needs 1 to ", kMaxStreams, " streams, got ",
                              pairs_.size()));
  for (size_t stream = 0; stream < pairs_.size(); ++stream) {
    if (static_cast<int>(pairs_[stream].size()) != size_)
      throw InvalidArgument(cat("rank ", rank_, ": context of size ", size_, " needs one pair slot per rank, got ",
                                pairs_[stream].size(), " on stream ", stream));
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_ && !pairs_[stream][peer])
        throw InvalidArgument(cat("rank ", rank_, ": no connection to peer rank ", peer, " on stream ", stream));
    }
  }
  if (!device_) throw InvalidArgument(cat("rank ", rank_, ": a context needs a transport device"));
}

// Members are destroyed in reverse order: the work queue (finishing queued
// collectives) goes before the pairs, which go before their device.
Context::~Context() = default;

transport::Pair& Context::pair(int peer, int stream) {
  if (peer < 0 || peer >= size_ || peer == rank_ || stream < 0 || stream >= streams())
    throw InvalidArgument(cat("rank ", rank_, ": no pair to rank ", peer, " on stream ", stream,
                              " in a context of size ", size_, " with ", streams(), " streams"));
  return *pairs_[static_cast<size_t>(stream)][static_cast<size_t>(peer)];
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
