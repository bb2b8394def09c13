// One reliable-connected queue pair to one peer: its receive slots and
// credits, the queue of sends waiting for credits or room, tag matching, and
// the rendezvous of large messages written straight into the receiver's
// buffer. Every member is guarded by the engine's mutex (the `_locked`
// suffix): posts come from user threads, completions from whichever thread
// polls the completion queue, both under that one lock.
//
// Flow control: each side pre-posts kSlots receives. A sender spends one
// credit per message that consumes a receive (every send, and a large
// message's last write, which carries immediate data), and gets credits back
// in the header of every message the receiver sends, or in an explicit
// credit message once half the window is owed. Ordinary messages leave two
// credits unspent: one for a credit message, one for an abort or goodbye, so
// neither side can ever wait for the other with both windows empty, and no
// send ever relies on the peer's receiver-not-ready retries.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/job_secret.h"
#include "transport/ibverbs/verbs.h"
#include "transport/ibverbs/wire.h"
#include "transport/engine_core.h"
#include "transport/positions.h"
#include "transport/tag_matching.h"
#include "transport/transport.h"

namespace chorus::transport::ibverbs {

// What one message waiting for its receive costs beyond its bytes, against
// the bound on unexpected bytes.
inline constexpr size_t kArrivalOverhead = 128;

inline constexpr uint32_t kSlots = 32;
inline constexpr size_t kSlotBytes = 16 * 1024;
inline constexpr size_t kEagerLimit = kSlotBytes - kHeaderBytes;
inline constexpr uint32_t kSendDepth = 128;

// What a connection needs from its engine, beyond what every transport's
// connection does (called with the engine's mutex held).
class ConnectionOwner : public CommonConnectionOwner {
 public:
  // Fails the whole device; the engine finishes the abort after the caller lets go of the lock.
  virtual void fail_locked(std::exception_ptr reason) = 0;
  // A registration for a message's buffer (cached or for this message only).
  virtual std::shared_ptr<MemoryRegion> region_for(const std::byte* data, size_t bytes) = 0;
  // Registers memory this connection owns for one message.
  virtual std::shared_ptr<MemoryRegion> register_owned(const std::byte* data, size_t bytes) = 0;

 protected:
  ~ConnectionOwner() = default;
};

// Where a connection is in its life.
enum class LinkState : uint8_t {
  resolving,    // dialer: address and route resolution
  connecting,   // the queue pair exists; waiting for ESTABLISHED
  proving,      // established; the peer has not proved the job secret yet
  ready,        // proved both ways: carries messages
  closed,       // the peer said goodbye, or we closed in order
  failed,
};

class Connection {
 public:
  Connection(ConnectionOwner& owner, uint32_t id, rdma_cm_id* cm_id, bool dialer, int peer_rank, int stream);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  uint32_t id() const { return id_; }
  rdma_cm_id* cm_id() const { return cm_id_; }
  bool dialer() const { return dialer_; }
  int peer_rank() const { return peer_rank_; }
  int stream() const { return stream_; }
  LinkState state() const { return state_; }
  void set_state(LinkState state) { state_ = state; }
  // "peer rank 3 (10.77.0.2:41234 via rxe0)"
  const std::string& peer_label() const { return peer_label_; }
  void set_peer_label(std::string label) { peer_label_ = std::move(label); }

  // Creates the queue pair on cm_id with the engine's protection domain and
  // completion queue, registers the slots and posts every receive. Returns
  // an error text, empty on success.
  std::string create_queue_pair_locked(ibv_pd* pd, ibv_cq* cq, uint32_t max_send_wr, size_t max_message_bytes);

  // Handshake: the two challenges and what the proofs bind; a dialer also
  // presents the nonce the acceptor published, and keeps why an attempt failed.
  uint64_t acceptor_nonce = 0;
  std::string why_failed;
  Challenge my_challenge{};
  Challenge peer_challenge{};
  Proof proof(bool of_dialer, const JobSecret& secret) const;
  void send_proof_locked(const Proof& proof);

  // User side, through ConnectionPair: each takes the engine's lock.
  void post_send(Request& request, Tag tag, std::span<const std::byte> data);
  bool post_recv(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived);
  // Pair::find_unclaimed, under the engine's lock.
  std::optional<Tag> find_unclaimed(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const;
  std::optional<Tag> find_unclaimed_locked(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const {
    return matching_.find_unclaimed(group, oldest, wanted);
  }
  void post_one_sided(Request& request, bool put, std::byte* local, size_t bytes, RemoteMemory remote);
  void send_probe(uint64_t probe, uint64_t group);
  // ...and under it.
  void post_send_locked(Request& request, Tag tag, std::span<const std::byte> data);
  // Pair::post_recv (only_if_arrived: post_recv_if_arrived, returning
  // whether it posted); `device_failure`: the engine's, null while it lives.
  bool post_recv_locked(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived,
                        const std::exception_ptr& device_failure);
  void send_probe_locked(uint64_t probe, uint64_t group);
  // RDMA write (put) or read (get) of [local, local + bytes) to or from the
  // peer's registered memory, in chunks of at most the largest message.
  void post_one_sided_locked(Request& request, bool put, std::byte* local, size_t bytes, RemoteMemory remote);
  bool probe_answered(uint64_t probe) const { return probe_answers_.answered(probe); }
  std::optional<uint64_t> answered_position(uint64_t probe, uint64_t group) const {
    return probe_answers_.position(probe, group);
  }

  // Completions for this connection's work requests. `proven` is called
  // when a proof message arrives during the handshake (returns whether it
  // holds). Returns false when the connection must be dropped (a stranger).
  bool on_completion_locked(const ibv_wc& completion, const std::function<bool(std::span<const std::byte>)>& proven);

  // Closing.
  void queue_goodbye_locked();
  void queue_abort_locked(std::span<const std::byte> text, uint64_t error_class, uint64_t blamed_rank);
  bool peer_said_goodbye() const { return peer_said_goodbye_; }
  // Whether every queued message left and every send completed.
  bool sends_drained_locked() const { return outgoing_.empty() && writes_.empty() && sends_in_flight_ == 0; }
  size_t pending_requests_locked() const;
  // Moves the queue pair to the error state: the device then accepts no
  // byte more for it and flushes every posted work request.
  void enter_error_state_locked();
  // Whether every posted work request has completed (flushed).
  bool flushed_locked() const { return receives_posted_ == 0 && sends_in_flight_ == 0; }
  // Fails every request with `error`; afterwards no user buffer is touched.
  void fail_requests_locked(const std::exception_ptr& error);
  // After the peer's goodbye or disconnect: fails what waits on the peer, naming it.
  void on_peer_closed_locked();
  std::exception_ptr closed_context_error(const std::string& detail) const;
  // Whether a work request was flushed while the link was ready, before
  // `moment`, and no goodbye or disconnect has explained it since.
  bool flush_unexplained_since(std::chrono::steady_clock::time_point moment) const {
    return state_ == LinkState::ready && !peer_said_goodbye_ && flushed_since_ && *flushed_since_ < moment;
  }

 private:
  struct Outgoing {
    MessageHeader header;
    std::vector<std::byte> payload;  // eager data (copied at post) and abort texts
  };
  // A message that arrived before its receive: eager data, or a large
  // message's announcement (the data stays with the sender until asked).
  // Each charges its length plus kArrivalOverhead, so a flood of empty
  // messages is bounded too.
  struct EarlyMessage : Arrival {
    bool rendezvous = false;
    uint64_t send_id = 0;
    std::vector<std::byte> payload;
  };
  struct LargeSend {
    Request* request = nullptr;  // null once completed early (an eager send copied)
    std::span<const std::byte> data;
    std::vector<std::byte> owned;  // the copy of an eager send
    std::shared_ptr<MemoryRegion> region;
    uint64_t remote_address = 0;
    uint32_t remote_key = 0;
    uint32_t receive_id = 0;
    size_t written = 0;  // bytes posted as writes so far
    bool last_posted = false;
  };
  struct OneSided {
    Request* request = nullptr;
    bool put = true;
    std::byte* local = nullptr;
    size_t bytes = 0;
    size_t posted = 0;
    RemoteMemory remote;
    std::shared_ptr<MemoryRegion> region;
  };
  struct LargeRecv {
    Request* request = nullptr;
    std::span<std::byte> buffer;
    std::shared_ptr<MemoryRegion> region;
  };

  // Posts what credits, slots and queue room allow.
  void pump_locked();
  // Copies header and payload into a free send slot and posts it; the caller
  // checked credits, slots and queue room. False when posting failed the device.
  bool post_slot_message_locked(MessageHeader header, std::span<const std::byte> payload);
  static MessageHeader data_header(MessageKind kind, const Tag& tag, size_t bytes);
  bool post_next_write_locked(LargeSend& send, uint32_t send_id);
  bool post_next_one_sided_locked(OneSided& operation, uint32_t id);
  void repost_receive_locked(uint32_t slot);
  uint32_t take_returned_credits_locked();
  void maybe_return_credits_locked();
  bool may_spend_credit(MessageKind kind) const;
  void queue_locked(MessageHeader header, std::vector<std::byte> payload = {});

  void on_message_locked(const MessageHeader& header, std::span<const std::byte> payload);
  void on_data_locked(const Tag& tag, size_t bytes, bool rendezvous, uint64_t send_id,
                      std::span<const std::byte> payload);
  // Lands a matched message (copy or clear-to-send); false after a mismatch failed the device.
  bool deliver_locked(PostedReceive& posted, const Tag& tag, size_t bytes, bool rendezvous, uint64_t send_id,
                      std::span<const std::byte> payload);
  void start_large_receive_locked(PostedReceive& posted, uint64_t send_id);
  void on_clear_to_send_locked(const MessageHeader& header);
  void corrupt_locked(const std::string& what);

  ConnectionOwner& owner_;
  const uint32_t id_;
  rdma_cm_id* cm_id_;
  const bool dialer_;
  const int peer_rank_;
  const int stream_;
  std::string peer_label_;
  LinkState state_ = LinkState::resolving;

  // Slots: kSlots receive slots, then kSlots send slots, in one region.
  std::unique_ptr<std::byte[], void (*)(void*)> slots_{nullptr, nullptr};
  std::shared_ptr<MemoryRegion> slots_region_;
  std::vector<uint32_t> free_send_slots_;
  uint32_t max_send_wr_ = 0;
  uint32_t max_inline_ = 0;
  size_t max_message_bytes_ = 0;
  bool has_queue_pair_ = false;

  uint32_t credits_ = kSlots;        // sends the peer has room for
  uint32_t credits_owed_ = 0;        // receives re-posted and not yet reported
  bool credit_queued_ = false;
  uint32_t receives_posted_ = 0;
  uint32_t sends_in_flight_ = 0;     // posted send-queue work requests

  std::deque<Outgoing> outgoing_;
  std::deque<uint32_t> writes_;  // send ids cleared to write, in order
  std::map<uint32_t, LargeSend> large_sends_;
  std::map<uint32_t, LargeRecv> large_recvs_;
  std::map<uint32_t, OneSided> one_sided_;
  std::deque<uint32_t> one_sided_queue_;  // ids with chunks left to post, in order
  uint32_t next_one_sided_id_ = 1;
  uint32_t next_send_id_ = 1;
  uint32_t next_recv_id_ = 1;

  TagMatching<EarlyMessage> matching_;

  bool peer_said_goodbye_ = false;
  bool requests_failed_ = false;
  std::optional<std::chrono::steady_clock::time_point> flushed_since_;
  ProbeAnswers probe_answers_;
};

// wr_id: the connection id, what the request was, and a slot or send id.
enum class WorkKind : uint64_t { receive = 1, send = 2, write = 3, write_last = 4, one_sided = 5, one_sided_last = 6 };
inline uint64_t work_id(uint32_t connection, WorkKind kind, uint32_t value) {
  return (static_cast<uint64_t>(connection) << 40) | (static_cast<uint64_t>(kind) << 32) | value;
}
inline uint32_t work_connection(uint64_t id) { return static_cast<uint32_t>(id >> 40); }
inline WorkKind work_kind(uint64_t id) { return static_cast<WorkKind>((id >> 32) & 0xff); }
inline uint32_t work_value(uint64_t id) { return static_cast<uint32_t>(id); }

}  // namespace chorus::transport::ibverbs
