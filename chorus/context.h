// A Context is one rank's membership in a job: its rank, the job size, one
// or more connected Pairs (streams) to every other rank, and the numbering of
// collectives.
//
// Collectives on a Context must be issued in the same order on every rank (as
// in MPI and NCCL); the Context numbers them so callers never manage tags.
// After any error (dead peer, timeout, mismatch, abort) the Context is
// finished: every later call throws that first error again.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace chorus {
namespace transport {
class Device;
class Pair;
}  // namespace transport
namespace detail {
class WorkQueue;
}

class Context {
 public:
  // pairs[peer], null for this rank: one stream.
  Context(int rank, int size, std::unique_ptr<transport::Device> device,
          std::vector<std::unique_ptr<transport::Pair>> pairs, std::chrono::milliseconds timeout);
  // pairs[stream][peer]: as many streams as the outer vector holds (at least one).
  Context(int rank, int size, std::unique_ptr<transport::Device> device,
          std::vector<std::vector<std::unique_ptr<transport::Pair>>> pairs, std::chrono::milliseconds timeout);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Default for every collective; an options struct may override per call.
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  // How long a waiting collective polls before sleeping (ConnectOptions::poll_time).
  static constexpr std::chrono::microseconds kDefaultPollTime{200};
  std::chrono::microseconds poll_time() const { return poll_time_; }
  void set_poll_time(std::chrono::microseconds poll_time) { poll_time_ = poll_time; }
  // Connections per peer (ConnectOptions::streams); large messages are
  // striped over all of them (docs/streams.md).
  static constexpr int kDefaultStreams = 1;
  static constexpr int kMaxStreams = 16;
  int streams() const { return static_cast<int>(pairs_.size()); }

  // Unblocks every pending and later operation with Aborted(reason). Any thread.
  void abort(const std::string& reason = "aborted by the application");
  // Throws the error that finished this Context, if any.
  void throw_if_failed() const;

  // Internal seams for the algorithm layer.
  transport::Device& device() { return *device_; }
  transport::Pair& pair(int peer, int stream = 0);
  // Numbers collectives in issue order; equal on every rank for the same call.
  uint32_t next_sequence() { return next_sequence_++; }
  detail::WorkQueue& work_queue();
  // Keeps an object (the embedded store server of rank 0) alive as long as the Context.
  void keep_alive(std::shared_ptr<void> object) { kept_alive_.push_back(std::move(object)); }

 private:
  std::vector<std::shared_ptr<void>> kept_alive_;  // destroyed last
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::chrono::microseconds poll_time_ = kDefaultPollTime;
  std::unique_ptr<transport::Device> device_;
  std::vector<std::vector<std::unique_ptr<transport::Pair>>> pairs_;  // [stream][peer], null for self
  uint32_t next_sequence_ = 0;
  std::once_flag work_queue_once_;
  std::unique_ptr<detail::WorkQueue> work_queue_;
};

}  // namespace chorus
