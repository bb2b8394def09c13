// The shared-memory device core: the listener, the progress thread,
// admitting dialers through the handshake, the connections, polling and abort.
// The Device handed to the Mesh is a thin owner of this core; Pair handles
// share it, so its memory stays valid in any destruction order.
//
// The handshake: the higher rank dials the lower one's abstract socket and
// sends a hello (the listener's nonce, both ranks, an address of its own to
// probe) with its doorbell eventfd. The listener's thread checks it and the
// dialer's credentials, creates the segment, probes whether it can read the
// dialer's memory, and answers with an ack carrying the segment's memfd and
// its own doorbell. The dialer checks the ack and the listener's
// credentials, maps the segment, probes the listener's memory and confirms.
// Each rank's connect() also checks the other's pid and uid against what it
// published.
//
// Sleeping: while a caller polls (begin_polling) it consumes the rings
// itself and asks the peers for no doorbells. The device's thread sleeps in
// epoll on its doorbell, the listener, pending handshakes and every side
// socket. Only while some caller waits without polling (begin_waiting) does
// it move bytes and, before sleeping, ask each peer for a doorbell on new
// records or freed space: between two polling collectives nobody needs the
// records that arrive, and a doorbell is a system call and a thread wake-up.
// Work only progress finishes (a pull to run, a send still queued) wakes it
// whatever the callers do, so a peer waiting on this rank never waits on a
// caller that went away. A side socket's end of stream wakes it always.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/shm/address.h"
#include "transport/shm/connection.h"
#include "transport/progress_poll.h"
#include "base/rejection_log.h"
#include "transport/shm/shm.h"
#include "transport/shm/side_channel.h"

namespace chorus::transport::shm {

class Engine final : public EngineCore<ConnectionOwner>, public std::enable_shared_from_this<Engine> {
 public:
  explicit Engine(const ShmDeviceOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start();
  // Orderly close: goodbye to every peer (or an abort if requests are still
  // pending), stop the thread. Later posts fail.
  void shutdown();

  std::vector<std::byte> address() const { return encode_address(address_); }
  void check_peer(int peer_rank, std::span<const std::byte> peer_address) const;
  std::unique_ptr<Pair> connect(int peer_rank, std::span<const std::byte> peer_address, Deadline deadline,
                                int stream);
  // Every peer on this host is the same shared memory away.
  LinkModel link_model(int /*peer_rank*/) const { return link_model_; }
  KnockAnswer knock(int peer_rank, std::span<const std::byte> peer_address) const;
  bool progress();
  void begin_polling();
  void end_polling();
  void begin_waiting();
  void end_waiting();
  // Device::create_shared_region / open_shared_region (shared_region.cc).
  std::unique_ptr<SharedRegion> create_shared_region(size_t bytes);
  std::unique_ptr<SharedRegion> open_shared_region(int peer_rank, std::span<const std::byte> description,
                                                   size_t bytes);

  // ConnectionOwner
  void abort(std::exception_ptr reason, LogLevel level) override { abort(std::move(reason), level, true); }
  // wait = false: the device's thread fails the requests; returns at once.
  void abort(std::exception_ptr reason, LogLevel level, bool wait);
  // Device::relay_instead.
  void relay_instead(std::exception_ptr reason);
  bool shutting_down() const override { return shutting_down_.load(std::memory_order_acquire); }
  void work_pending() override {
    if (polling_callers_.load(std::memory_order_acquire) == 0) {
      pending_work_.store(true, std::memory_order_release);
      wake();
    }
  }

 private:
  // The epoll tokens the device's thread dispatches on (epoll_token.h).
  enum class TokenKind : uint64_t { doorbell = 1, listener = 2, handshake = 3, side = 4 };
  // A dialer that has not finished its handshake by then is not one of ours.
  static constexpr auto kHandshakeTimeout = std::chrono::seconds(5);

  struct Incoming {
    Fd fd;
    Clock::time_point give_up_at;
    Challenge challenge = fresh_challenge();
    std::vector<std::byte> hello_message;  // as received, proof included: the ack's proof covers it
    bool hello_done = false;
    Credentials credentials;
    Hello hello;
    Fd dialer_doorbell;
    Segment segment;
    bool listener_pulls = false;
    // The hello passed every check but the pid's: this rank has not yet
    // seen what the dialer's rank published (check_peer), so nothing is
    // sent until it has.
    bool awaiting_published_pid = false;
  };
  struct Admitted {
    Fd side;
    Credentials credentials;
    Fd doorbell;
    Segment segment;
    bool dialer_pulls = false;
    bool listener_pulls = false;
  };

  void run();
  // The device's thread: ProgressLoop::run and its hooks.
  friend class transport::ProgressLoop;
  ProgressLoop::Turn before_wait();
  bool wait_failed(std::exception_ptr error);
  void dispatch(uint64_t token, uint32_t events);
  void after_wait();
  void accept_all();
  void on_handshake_readable(uint64_t id);
  std::string on_hello(Incoming& incoming, std::span<const std::byte> message, std::vector<Fd>& fds);
  std::string answer_hello(Incoming& incoming);
  void answer_awaiting_hellos();
  std::optional<uint32_t> published_pid(int peer_rank) const;
  void reject(uint64_t id, const std::string& why);
  void expire_handshakes();
  int wait_timeout_ms() const;
  bool progress_all();
  bool arm_all();
  void disarm_all();
  void wake();
  void run_cleanup_if_needed();
  bool probe(pid_t pid, uint64_t address, uint64_t value) const;
  std::unique_ptr<Pair> add_connection(ConnectionSetup setup);
  std::vector<Connection*> connections() const;

  const ShmDeviceOptions options_;
  ShmAddress address_;
  LinkModel link_model_;
  // A word of ours a peer reads once at connect to learn whether it may
  // copy out of this process (process_vm_readv).
  uint64_t probe_value_ = 0;
  Fd listener_;
  ProgressLoop loop_;  // its eventfd is the doorbell peers ring

  // Under mutex_ (EngineCore's); changed_ also tells of a dialer admitted and of cleanup done.
  std::atomic<bool> shutting_down_{false};
  bool cleanup_started_ = false;
  bool cleanup_done_ = false;
  std::vector<std::byte> abort_message_;
  std::map<int, Admitted> admitted_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::unique_ptr<std::atomic<Connection*>[]> by_peer_;
  std::atomic<int> polling_callers_{0};
  std::atomic<int> waiting_callers_{0};
  std::atomic<bool> pending_work_{false};

  // The device's thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Incoming>> handshakes_;
  // The pid each peer published, by rank, as check_peer saw it (every rank
  // checks every peer before anyone dials). The listener compares a dialer's
  // pid, as the kernel reports it, with its rank's before it sends any
  // descriptor: a process of this uid that knows no secret cannot take a
  // rank's seat in a job that has none.
  mutable std::mutex published_mutex_;
  mutable std::vector<std::optional<uint32_t>> published_pids_;
  RejectionLog rejections_;  // the engine thread's, like handshakes_
  uint64_t next_handshake_id_ = 0;
};

}  // namespace chorus::transport::shm
