// The TCP device core: the listening socket, the single epoll progress
// thread, incoming handshakes, the table of connections and the abort
// machinery. The Device handed to the Context is a thin owner of this core;
// Pair handles share it so their memory stays valid in any destruction order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/tcp/handshake.h"
#include "transport/tcp/connection.h"
#include "transport/progress_poll.h"
#include "base/rejection_log.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/tcp.h"

namespace chorus::transport::tcp {

class Engine final : public EngineCore<ConnectionOwner>, public std::enable_shared_from_this<Engine> {
 public:
  explicit Engine(const TcpDeviceOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  // A port on a routable address: reachable from other hosts.
  bool listens_beyond_host() const { return !listen_address_.is_loopback(); }

  void start();
  // Orderly close: goodbye to every peer (or an abort if requests are still
  // pending), stop the progress thread, close the sockets. Later posts fail.
  void shutdown();

  int size() const { return options_.size; }
  std::vector<std::byte> address() const;
  void check_peer(int peer_rank, std::span<const std::byte> peer_address) const;
  std::unique_ptr<Pair> connect(int peer_rank, std::span<const std::byte> peer_address, Deadline deadline,
                                int stream);
  // The same-host model for a peer behind this host's own address.
  LinkModel link_model(int peer_rank) const;
  KnockAnswer knock(int peer_rank, std::span<const std::byte> peer_address) const;
  int streams() const { return options_.streams; }
  // Caller-side progress (Device::progress, begin_polling, end_polling).
  bool progress();
  bool await_arrival(std::chrono::microseconds limit);
  void begin_polling();
  void end_polling();
  // A caller is about to sleep until a request completes: the progress
  // thread must read again now, not when the parked connections linger out.
  void begin_waiting();

  // ConnectionOwner
  // Synchronous: once it returns, the progress thread touches no user buffer
  // or Request again. Idempotent; the first reason wins.
  void abort(std::exception_ptr reason, LogLevel level) override { abort(std::move(reason), level, true); }
  // wait = false: the progress thread fails the requests; returns at once.
  void abort(std::exception_ptr reason, LogLevel level, bool wait);
  // Device::relay_instead.
  void relay_instead(std::exception_ptr reason);
  bool shutting_down() const override { return shutting_down_.load(std::memory_order_acquire); }
  void set_write_interest(Connection& connection, bool writable) override;
  void stop_watching(Connection& connection) override;

 private:
  // The epoll tokens the progress thread dispatches on (epoll_token.h).
  enum class TokenKind : uint64_t { wake = 1, listener = 2, handshake = 3, connection = 4 };
  // A dialer that has not finished its hello by then is not one of ours.
  static constexpr auto kHandshakeTimeout = std::chrono::seconds(5);

  // The progress thread: ProgressLoop::run and its hooks.
  friend class transport::ProgressLoop;
  void run();
  ProgressLoop::Turn before_wait();
  bool wait_failed(std::exception_ptr error);
  void dispatch(uint64_t token, uint32_t events);
  void after_wait();
  void accept_all();
  void on_handshake_readable(uint64_t id);
  void continue_tls(uint64_t id, IncomingHandshake& incoming);
  // Why a proven hello may not take its link (empty when it may).
  std::string admission_conflict(const Hello& hello);
  // Hands a handshake that is done to wait_for_dialer.
  void admit(uint64_t id);
  void reject_handshake(uint64_t id, const std::string& why);
  void expire_handshakes();
  // The rejection log's summary line, when one is due.
  void log_rejection_summary();
  int wait_timeout_ms() const;
  void run_cleanup_if_needed();
  void cleanup();
  static void tell_admitted_dialer(AdmittedSocket& admitted, std::span<const std::byte> frame);
  void wake();
  // Progress thread, on EPOLLIN: while callers poll, turns EPOLLIN off for
  // the connection and leaves its bytes to them. Returns whether it did.
  bool park_if_polled(Connection& connection);
  void park_locked(Connection& connection);
  void unpark_all_locked();
  void unpark_locked(Connection& connection);  // leaves parked_ to the caller
  // Progress thread: takes the parked connections back once no caller has
  // polled for kParkLinger.
  void unpark_if_idle();
  void update_epoll_locked(Connection& connection);
  AdmittedSocket wait_for_dialer(const ListenerAddress& peer, int stream, Deadline deadline);
  // Index of (peer, stream) in by_link_; also the epoll token's value.
  size_t link(int peer, int stream) const {
    return static_cast<size_t>(peer) * static_cast<size_t>(options_.streams) + static_cast<size_t>(stream);
  }
  size_t links() const { return link(size(), 0); }

  const TcpDeviceOptions options_;
  SocketAddress listen_address_;
  LinkModel link_model_;
  LinkModel same_host_link_model_;
  uint64_t nonce_ = 0;
  Fd listener_;
  ProgressLoop loop_;

  // Under mutex_ (EngineCore's); changed_ also tells of a dialer admitted and of cleanup done.
  std::atomic<bool> shutting_down_{false};
  bool thread_running_ = false;
  bool cleanup_started_ = false;
  bool cleanup_done_ = false;
  std::vector<std::byte> abort_frame_;
  // Dialers that passed the handshake by (peer, stream), waiting for this rank's connect().
  std::map<std::pair<int, int>, AdmittedSocket> admitted_;
  // Dialers that proved the job secret but whose TLS handshake failed, and
  // why: wait_for_dialer reports it at once instead of timing out.
  std::map<std::pair<int, int>, std::string> tls_refused_;
  std::vector<std::unique_ptr<Connection>> connections_;
  // By peer rank: whether the peer listens on this host's own address.
  std::unique_ptr<std::atomic<bool>[]> peer_on_host_;
  // Callers inside begin_polling/end_polling and the connections whose
  // reading the progress thread left to them. Taken after a connection's mutex.
  std::mutex polling_mutex_;
  int polling_callers_ = 0;
  std::vector<Connection*> parked_;
  Clock::time_point polling_ended_{};  // when the last caller left
  // While set, the progress thread wakes every kParkLinger to see whether
  // the parked connections are idle; under polling_mutex_, read without it.
  std::atomic<bool> lingering_{false};
  // When a polling caller last read the parked connections that no receive
  // waits on (Clock ticks; progress()).
  std::atomic<int64_t> last_idle_sweep_{0};
  // By link(peer, stream); read by the progress thread without the mutex.
  std::unique_ptr<std::atomic<Connection*>[]> by_link_;

  // Progress thread only (or after it stopped).
  std::unordered_map<uint64_t, std::unique_ptr<IncomingHandshake>> handshakes_;
  RejectionLog rejections_;  // by the dialer's address (not its port): the engine thread's
  uint64_t next_handshake_id_ = 0;
};

}  // namespace chorus::transport::tcp
