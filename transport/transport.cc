#include "transport/transport.h"

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {

CompletionSignal::~CompletionSignal() {
  // A transport thread may still be inside notify(); wait for it to leave.
  std::lock_guard<std::mutex> lock(mutex_);
}

template <class Publish>
void CompletionSignal::notify(Publish&& publish) {
  std::lock_guard<std::mutex> lock(mutex_);
  publish();
  count_.fetch_add(1, std::memory_order_acq_rel);
  if (sleepers_.load(std::memory_order_acquire) > 0) cv_.notify_all();
}

uint64_t CompletionSignal::wait_change(uint64_t seen, Deadline deadline) {
  // A short spin catches completions that arrive within microseconds without
  // paying a futex sleep and wake-up, which on small VMs costs tens of µs.
  for (int spin = 0; spin < 4000; ++spin) {
    uint64_t now = count_.load(std::memory_order_acquire);
    if (now != seen) return now;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  sleepers_.fetch_add(1, std::memory_order_acq_rel);
  cv_.wait_until(lock, deadline.at(), [&] { return count_.load(std::memory_order_acquire) != seen; });
  sleepers_.fetch_sub(1, std::memory_order_acq_rel);
  return count_.load(std::memory_order_acquire);
}

void CompletionSignal::bump() {
  notify([] {});
}

void ArrivalNotifier::watch(std::shared_ptr<CompletionSignal> signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  signal_ = std::move(signal);
  watched_.store(signal_ != nullptr, std::memory_order_release);
}

void ArrivalNotifier::notify() {
  if (!watched_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (signal_) signal_->bump();
}

void Request::complete() {
  after_peer_heard();
  signal_->notify([this] { state_.store(State::done, std::memory_order_release); });
}

void Request::fail(std::exception_ptr error) {
  signal_->notify([this, &error] {
    error_ = std::move(error);
    state_.store(State::failed, std::memory_order_release);
  });
}

void Request::wait(Deadline deadline, const std::string& what) {
  uint64_t seen = signal_->count();
  while (!finished()) {
    if (deadline.expired()) throw TimeoutError(what);
    seen = signal_->wait_change(seen, deadline);
  }
  if (state() == State::failed) std::rethrow_exception(error_);
}

std::vector<std::byte> Device::export_memory(std::span<const std::byte>, const Memory& memory) {
  throw InvalidArgument(cat("rank ", rank(), ": the ", name(), " transport does not map ", to_string(memory),
                            " memory into its peers"));
}

std::byte* Device::map_peer_memory(int peer_rank, std::span<const std::byte>, const Memory& memory) {
  throw InvalidArgument(cat("rank ", rank(), ": the ", name(), " transport cannot map rank ", peer_rank, "'s ",
                            to_string(memory), " memory"));
}

std::unique_ptr<SharedRegion> Device::open_shared_region(int peer_rank, std::span<const std::byte>, size_t) {
  throw InvalidArgument(cat("rank ", rank(), ": the ", name(), " transport shares no memory with rank ", peer_rank));
}

}  // namespace chorus::transport

namespace chorus::transport {

std::string describe_tag(uint64_t group, uint64_t value) {
  std::string text = cat("tag 0x", std::hex, value);
  if (group != 0) text += cat(" of group 0x", std::hex, group);
  return text;
}

void Device::set_failure_listener(std::function<void(std::exception_ptr)> listener) {
  std::lock_guard<std::mutex> lock(listener_mutex_);
  failure_listener_ = std::move(listener);
}

void Device::notify_failure(const std::exception_ptr& reason) {
  // Held during the call, so clearing the listener waits for a call in progress.
  std::lock_guard<std::mutex> lock(listener_mutex_);
  if (failure_listener_) failure_listener_(reason);
}

void Pair::post_put(Request& request, std::span<const std::byte>, RemoteMemory) {
  request.mark_pending();
  request.fail(std::make_exception_ptr(
      InvalidArgument(cat("the transport to peer rank ", peer_rank(), " has no one-sided access"))));
}

void Pair::post_get(Request& request, std::span<std::byte>, RemoteMemory) {
  request.mark_pending();
  request.fail(std::make_exception_ptr(
      InvalidArgument(cat("the transport to peer rank ", peer_rank(), " has no one-sided access"))));
}

std::shared_ptr<Registration> Device::register_memory(std::span<const std::byte> data, Memory memory) {
  if (!accepts(memory))
    throw InvalidArgument(cat("rank ", rank(), ": the ", name(), " transport cannot move ", to_string(memory),
                              " memory"));
  return std::make_shared<Registration>(data.data(), data.size(), memory);
}

}  // namespace chorus::transport
