// The verbs device core: the rdma_cm listener and event channel, the one
// protection domain and completion queue every connection shares, the
// progress thread, connection setup (the higher rank dials, the lower
// accepts) with the job-secret proofs, and the abort machinery. The Device
// handed to the Context is a thin owner of this core; Pair handles and
// explicit registrations share it, so its memory outlives them.
//
// One mutex guards every connection: user threads post under it and the
// thread that polls the completion queue (the progress thread, or a waiting
// caller through progress()) handles completions under it. The progress
// thread also reads rdma_cm events, asynchronous device events and the
// completion channel, sleeping in epoll when nothing is in flight.
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
#include <string>
#include <thread>
#include <vector>

#include "base/long_lived_memory.h"
#include "base/rejection_log.h"
#include "transport/progress_poll.h"
#include "transport/ibverbs/address.h"
#include "transport/ibverbs/connection.h"
#include "transport/ibverbs/ibverbs.h"
#include "transport/ibverbs/verbs.h"
#include "transport/registration.h"

namespace chorus::transport::ibverbs {

// Accepted connections that have not proved themselves yet, at most: what a
// stranger can make a rank hold.
inline constexpr size_t kMaxUnproven = 16;

class Engine final : public EngineCore<ConnectionOwner>,
                     public LongLivedMemoryListener,
                     public std::enable_shared_from_this<Engine> {
 public:
  explicit Engine(const IbverbsDeviceOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  // An RDMA device: reachable over its fabric from other hosts.
  bool listens_beyond_host() const { return true; }

  // Whether this host has an RDMA device behind the chosen address.
  bool available() const { return verbs_ != nullptr; }
  void start();
  // Orderly close: goodbye to every peer (an abort if requests are pending),
  // stop the progress thread, disconnect. Later posts fail.
  void shutdown();

  std::vector<std::byte> address() const;
  void check_peer(int peer_rank, std::span<const std::byte> peer_address) const;
  std::unique_ptr<Pair> connect(int peer_rank, std::span<const std::byte> peer_address, Deadline deadline,
                                int stream);
  // Every peer is the same fabric away.
  LinkModel link_model(int /*peer_rank*/) const { return link_model_; }
  int streams() const { return options_.streams; }
  void abort(std::exception_ptr reason, bool wait);
  bool progress();
  void begin_polling();
  void end_polling();
  std::shared_ptr<Registration> register_memory(std::span<const std::byte> data);

  // Pair side.
  void post_send(Connection& connection, Request& request, Tag tag, std::span<const std::byte> data);
  // only_if_arrived: Pair::post_recv_if_arrived (returns whether it posted).
  bool post_recv(Connection& connection, Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived);
  std::optional<Tag> find_unclaimed(const Connection& connection, uint64_t group, size_t oldest, const UnclaimedFilter& wanted);
  void send_probe(Connection& connection, uint64_t probe, uint64_t group);
  void post_one_sided(Connection& connection, Request& request, bool put, std::byte* local, size_t bytes,
                      RemoteMemory remote);

  // ConnectionOwner
  void fail_locked(std::exception_ptr reason) override;
  std::shared_ptr<MemoryRegion> region_for(const std::byte* data, size_t bytes) override;
  std::shared_ptr<MemoryRegion> register_owned(const std::byte* data, size_t bytes) override;

  // LongLivedMemoryListener: drops the pin of chorus's own memory before it is freed.
  void retiring(MemoryRange range) override;

 private:
  // What the progress thread keeps of an rdma_cm event (acked at once, so
  // destroying an id never waits for us).
  struct CmEvent {
    rdma_cm_event_type type{};
    int status = 0;
    rdma_cm_id* id = nullptr;
    rdma_cm_id* listen_id = nullptr;
    std::vector<std::byte> private_data;
  };

  // The progress thread: ProgressLoop::run and its hooks. A failing wait
  // is retried (the next wake-up or the timeout comes round again).
  friend class transport::ProgressLoop;
  ProgressLoop::Turn before_wait();
  static int wait_timeout_ms() { return 100; }
  static bool wait_failed(const std::exception_ptr&) { return true; }
  void dispatch(uint64_t token, uint32_t events);
  static void after_wait() {}
  // Polls up to `budget` completions; returns how many.
  size_t poll_completions_locked(int budget);
  void handle_completion_locked(const ibv_wc& completion);
  void handle_cm_events();
  void on_cm_event_locked(const CmEvent& event);
  void on_connect_request_locked(const CmEvent& event);
  void on_established_locked(Connection& connection, const CmEvent& event);
  bool on_proof_locked(Connection& connection, std::span<const std::byte> proof);
  void drop_locked(Connection& connection, const std::string& why);
  // Drops handshakes past their deadline; fails the device for a flush no
  // disconnect explained (Connection::flush_unexplained_since).
  void expire_handshakes_locked();
  void handle_async_events();
  void drain_completion_channel();
  void cleanup(std::unique_lock<std::mutex>& lock);
  void wake();
  Connection* add_connection_locked(rdma_cm_id* id, bool dialer, int peer_rank, int stream);
  void destroy_connection_locked(uint32_t id);
  std::unique_ptr<Pair> make_pair_locked(Connection& connection);
  std::unique_ptr<Pair> dial(const VerbsAddress& peer, int stream, Deadline deadline);
  std::unique_ptr<Pair> wait_for_dialer(const VerbsAddress& peer, int stream, Deadline deadline);
  rdma_conn_param connection_parameters(const std::byte* private_data, uint8_t bytes) const;

  const IbverbsDeviceOptions options_;
  sockaddr_storage listen_address_{};
  VerbsAddress published_;
  LinkModel link_model_;
  EventChannel channel_;
  rdma_cm_id* listener_ = nullptr;
  ibv_context* verbs_ = nullptr;  // the listener's device; null: no RDMA here
  ProtectionDomain pd_;
  CompletionChannel completion_channel_;
  CompletionQueue cq_;
  std::unique_ptr<Registrar> registrar_;
  std::unique_ptr<RegistrationCache> cache_;
  bool listens_for_retirement_ = false;  // registered with long_lived_memory
  size_t max_message_bytes_ = 0;
  uint32_t max_send_wr_ = kSendDepth;
  uint8_t max_read_atoms_ = 0;
  ProgressLoop loop_;

  // Under mutex_ (EngineCore's):
  std::atomic<int> polling_callers_{0};
  bool cleanup_pending_ = false;
  bool cleanup_done_ = false;
  bool callback_due_ = false;
  bool thread_running_ = false;
  bool shut_down_ = false;
  // By id (never reused); null once destroyed.
  std::vector<std::unique_ptr<Connection>> connections_;
  // Proven acceptor-side connections by (peer, stream), until connect() takes them.
  std::map<std::pair<int, int>, uint32_t> admitted_;
  // Connections handed to the Context, by (peer, stream).
  std::map<std::pair<int, int>, uint32_t> linked_;
  // Live connections by their rdma_cm id: an event is dispatched through
  // this, never through an id another thread may have destroyed meanwhile.
  std::map<rdma_cm_id*, uint32_t> by_cm_id_;
  // Accepted, not yet proven: id -> when it gives up.
  std::map<uint32_t, Clock::time_point> unproven_;
  RejectionLog rejections_;  // under the lock, as the connections (by the dialer's address)
};

}  // namespace chorus::transport::ibverbs
