// A Device that wraps another and adds a kind of memory to what it moves
// (host_staging/, cuda_ipc/): everything else goes to the inner device as
// it is. Failures of the inner device become this one's (its listener is
// told), and the failure this device records itself (an abort) is kept
// apart, under a lock of its own: the inner device may call the listener on
// the very thread that is aborting it, which may hold the decorator's locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "transport/transport.h"

namespace chorus::transport {

// The Pair of a DecoratedDevice: the same peer over the inner device's pair;
// the decorator overrides the posts for its kind of memory.
class DecoratedPair : public Pair {
 public:
  explicit DecoratedPair(std::unique_ptr<Pair> inner) : inner_(std::move(inner)) {}
  int peer_rank() const override { return inner_->peer_rank(); }
  void send_liveness_probe(uint64_t probe, uint64_t group) override { inner_->send_liveness_probe(probe, group); }
  bool liveness_answered(uint64_t probe) const override { return inner_->liveness_answered(probe); }
  std::optional<uint64_t> answered_position(uint64_t probe, uint64_t group) const override {
    return inner_->answered_position(probe, group);
  }
  // A claim binds the receive to one message of the inner pair, which only
  // host memory maps onto one to one (device memory travels as several
  // messages of the decorator's own protocol): other memory fails.
  bool post_recv_if_arrived(Request& request, Tag tag, std::span<std::byte> data, Memory memory) override;
  bool peer_closed() const override { return inner_->peer_closed(); }
  std::optional<Tag> find_unclaimed(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const override {
    return inner_->find_unclaimed(group, oldest, wanted);
  }
  bool one_sided() const override { return inner_->one_sided(); }
  void post_put(Request& request, std::span<const std::byte> data, RemoteMemory target) override {
    inner_->post_put(request, data, target);
  }
  void post_get(Request& request, std::span<std::byte> data, RemoteMemory source) override {
    inner_->post_get(request, data, source);
  }
  Pair& inner() { return *inner_; }

 private:
  std::unique_ptr<Pair> inner_;
};

enum class Direction : uint8_t { send, receive };

// The Pair of a decorator that moves one kind of memory itself: posts of
// memory the decorator takes (`Decorator::moves_itself`) go to
// `Decorator::start(pair, direction, request, tag, data, device)`, every
// other post to the inner pair as it is.
template <class Decorator>
class KindPair final : public DecoratedPair {
 public:
  KindPair(Decorator& decorator, std::unique_ptr<Pair> inner)
      : DecoratedPair(std::move(inner)), decorator_(decorator) {}
  using Pair::post_recv;
  using Pair::post_send;
  void post_send(Request& request, Tag tag, std::span<const std::byte> data, Memory memory) override {
    if (!decorator_.moves_itself(memory)) return inner().post_send(request, tag, data, memory);
    decorator_.start(*this, Direction::send, request, tag,
                     std::span<std::byte>(const_cast<std::byte*>(data.data()), data.size()), memory.device);
  }
  void post_recv(Request& request, Tag tag, std::span<std::byte> data, Memory memory) override {
    if (!decorator_.moves_itself(memory)) return inner().post_recv(request, tag, data, memory);
    decorator_.start(*this, Direction::receive, request, tag, data, memory.device);
  }

 private:
  Decorator& decorator_;
};

class DecoratedDevice : public Device {
 public:
  explicit DecoratedDevice(std::unique_ptr<Device> inner);
  ~DecoratedDevice() override;

  std::string_view name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  std::vector<std::byte> address() const override { return inner_->address(); }
  void check_peer(int peer_rank, std::span<const std::byte> peer_address) const override {
    inner_->check_peer(peer_rank, peer_address);
  }
  int streams() const override { return inner_->streams(); }
  LinkModel link_model(int peer_rank) const override { return inner_->link_model(peer_rank); }
  bool dials(int peer_rank) const override { return inner_->dials(peer_rank); }
  KnockAnswer knock(int peer_rank, std::span<const std::byte> peer_address) const override {
    return inner_->knock(peer_rank, peer_address);
  }
  std::shared_ptr<Registration> register_memory(std::span<const std::byte> data, Memory memory) override {
    return inner_->register_memory(data, memory);
  }
  std::unique_ptr<SharedRegion> create_shared_region(size_t bytes) override {
    return inner_->create_shared_region(bytes);
  }
  std::unique_ptr<SharedRegion> open_shared_region(int peer_rank, std::span<const std::byte> description,
                                                   size_t bytes) override {
    return inner_->open_shared_region(peer_rank, description, bytes);
  }
  bool maps_peer_memory(const Memory& memory) const override { return inner_->maps_peer_memory(memory); }
  bool listens_beyond_host() const override { return inner_->listens_beyond_host(); }
  std::vector<std::byte> export_memory(std::span<const std::byte> data, const Memory& memory) override {
    return inner_->export_memory(data, memory);
  }
  std::byte* map_peer_memory(int peer_rank, std::span<const std::byte> exported, const Memory& memory) override {
    return inner_->map_peer_memory(peer_rank, exported, memory);
  }
  void abort_async(std::exception_ptr reason) override;
  void relay_instead(std::exception_ptr reason) override { inner_->relay_instead(std::move(reason)); }
  std::exception_ptr failure() const override;
  bool progress() override { return inner_->progress(); }
  bool await_arrival(std::chrono::microseconds limit) override { return inner_->await_arrival(limit); }
  void begin_polling() override { inner_->begin_polling(); }
  void end_polling() override { inner_->end_polling(); }
  void begin_waiting() override { inner_->begin_waiting(); }
  void end_waiting() override { inner_->end_waiting(); }
  // The inner device buffers the messages, so it reports their arrival.
  void watch_arrivals(std::shared_ptr<CompletionSignal> signal) override { inner_->watch_arrivals(std::move(signal)); }

 protected:
  Device& inner() const { return *inner_; }
  // The decorator's own failure (from abort), before it fails its own work.
  void record_failure(std::exception_ptr reason);
  // Closes the inner device, as a normal close: it says goodbye to its peers
  // and fails what it still had posted. A decorator's destructor calls it
  // before its own in-flight work (and the requests the inner device holds)
  // goes; nothing may use inner() afterwards.
  void close_inner();

 private:
  std::unique_ptr<Device> inner_;
  mutable std::mutex failure_mutex_;
  std::exception_ptr failure_;
};

// A decorator that moves its kind of memory as transfers of its own over
// the inner pairs (host staging's pinned chunks, cuda_ipc's descriptor and
// ack), which one worker thread moves on as their inner requests finish.
// `Transfer` has `Request* user`: the caller's request, null once settled.
template <class Transfer>
class TransferDevice : public DecoratedDevice {
 public:
  using DecoratedDevice::DecoratedDevice;

  void abort(std::exception_ptr reason) override {
    inner().abort(reason);  // no inner request touches a transfer's buffers after this
    record_failure(reason);
    std::lock_guard lock(mutex_);
    fail_all(failure());
  }

 protected:
  // Both under mutex_. advance: moves one transfer on as far as it can now,
  // and says whether it is over. fail_all: settles every transfer with
  // `reason` and drops those no inner request holds any more.
  virtual bool advance(Transfer& transfer) = 0;
  virtual void fail_all(std::exception_ptr reason) = 0;
  // The worker's round, under mutex_: whenever an inner request finishes,
  // and every kWorkerWake in case a wake-up was missed.
  virtual void on_worker_round() = 0;

  void start_worker() {
    worker_ = std::thread([this] { work(); });
  }
  // The first step of the decorator's destructor, a normal close rather than
  // an abort: the worker stops, then the inner device says goodbye to its
  // peers as it would alone and fails what it still had posted (the
  // transfers' requests and the signal they report to outlive it). What is
  // left for the destructor is to fail its transfers under mutex_.
  void stop_worker_and_close_inner() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    if (worker_.joinable()) worker_.join();
    close_inner();
  }

  // Advances every transfer, dropping those that are over. Under mutex_.
  void advance_all() {
    for (auto transfer = transfers_.begin(); transfer != transfers_.end();) {
      auto next = std::next(transfer);
      if (advance(**transfer)) transfers_.erase(transfer);
      transfer = next;
    }
  }
  // Completes (or fails, with `error`) the caller's request, once.
  static void settle(Transfer& transfer, std::exception_ptr error) {
    if (!transfer.user) return;
    if (error) transfer.user->fail(error);
    else transfer.user->complete();
    transfer.user = nullptr;
  }

  mutable std::mutex mutex_;  // the transfers, and what the decorator keeps beside them
  CompletionSignal signal_;   // before the transfers: their requests attach to it
  std::list<std::unique_ptr<Transfer>> transfers_;

 private:
  static constexpr auto kWorkerWake = std::chrono::milliseconds(50);

  void work() {
    std::unique_lock lock(mutex_);
    // While transfers are in flight the worker waits on the inner device
    // like any caller (begin_waiting), so its thread moves their control
    // messages whatever the callers do: a rank whose own collective has
    // ended polls nothing, and an inner transport that reads only for
    // callers polling or waiting (shm) would otherwise leave a peer's
    // descriptor or ack unread until the next call.
    bool waiting_on_inner = false;
    while (!stopping_) {
      const uint64_t seen = signal_.count();
      on_worker_round();
      const bool in_flight = !transfers_.empty();
      if (in_flight != waiting_on_inner) {
        if (in_flight) inner().begin_waiting();
        else inner().end_waiting();
        waiting_on_inner = in_flight;
      }
      lock.unlock();
      signal_.wait_change(seen, Deadline::after(kWorkerWake));
      lock.lock();
    }
    if (waiting_on_inner) inner().end_waiting();
  }

  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace chorus::transport
