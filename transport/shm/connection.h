// One shared-memory peer: the two rings of the segment, the messages
// waiting to enter the outgoing ring, the receive side that lands records in
// posted buffers (or keeps them until a receive is posted), the single-copy
// pulls, and the side channel.
//
// Two protocols, by size:
// - Eager: a message travels in the ring as a `message` record and as many
//   `more` records as it needs (two copies: into the ring, out of it). The
//   send completes once its bytes are in the ring.
// - Pull: from pull_threshold bytes, when the receiver can read the sender's
//   memory (process_vm_readv, checked once per pair at connect), only a
//   `pull` record travels; the receiver copies the message straight from the
//   sender's buffer into its own (one copy) and answers with a `pulled`
//   record, which completes the send. Pull slots (segment.h) keep a sender
//   that gives up from handing out memory it no longer owns.
// - The eager window: the receiver counts the eager bytes its posted
//   receives took (RingControl::eager_bytes_claimed). A sender whose eager
//   bytes sent exceed that by more than eager_window pulls its next
//   messages whatever their size, so a sender running ahead waits for its
//   receiver instead of piling its messages into the receiver's memory.
//
// Threads: any thread posts (posting is thread-safe); whoever progresses (a
// waiting caller, or the device's thread while callers sleep) moves bytes.
// `send_mutex_` guards the outgoing ring and queue, `mutex_` the receive
// bookkeeping. The receive state machine belongs to whoever holds
// `consumer_`, pulls to whoever holds `puller_`; bytes land in user memory
// under those two only, which is what abort waits out.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/log.h"
#include "transport/file_descriptor.h"
#include "transport/shm/ring.h"
#include "transport/shm/segment.h"
#include "transport/deferred_failure.h"
#include "transport/engine_core.h"
#include "transport/positions.h"
#include "transport/tag_matching.h"
#include "transport/transport.h"

namespace chorus::transport::shm {

// What a connection needs from its device, beyond what every transport's connection does.
class ConnectionOwner : public CommonConnectionOwner {
 public:
  // Aborts the whole device. Never called with a connection's lock held.
  virtual void abort(std::exception_ptr reason, LogLevel level) = 0;
  virtual bool shutting_down() const = 0;
  // A post left work that only progress finishes (a pull to run, a send
  // still queued): the device's thread takes it up unless a caller polls.
  virtual void work_pending() = 0;

 protected:
  ~ConnectionOwner() = default;
};

struct ConnectionSetup {
  int peer_rank = -1;
  pid_t peer_pid = 0;
  Fd side;             // the unix socket to the peer
  Fd peer_doorbell;    // the peer's eventfd
  Segment segment;
  bool listener = false;     // this rank created the segment (the lower rank)
  bool peer_pulls = false;   // the peer can copy out of this process's memory
  bool we_pull = false;      // this process can copy out of the peer's
  size_t pull_threshold = 0;
  size_t eager_window = 0;   // ShmDeviceOptions::eager_window_bytes
};

class Connection {
 public:
  Connection(ConnectionOwner& owner, ConnectionSetup setup);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int peer_rank() const { return peer_rank_; }
  // Pair::peer_closed.
  bool peer_closed() const { return peer_gone_.load(std::memory_order_acquire); }
  int side_fd() const { return side_.get(); }
  const std::string& peer_label() const { return peer_label_; }

  // User side.
  void post_send(Request& request, Tag tag, std::span<const std::byte> data);
  void post_recv(Request& request, Tag tag, std::span<std::byte> data);
  // only_if_arrived: Pair::post_recv_if_arrived (returns whether it posted).
  bool post_recv(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived);
  // Pair::find_unclaimed.
  std::optional<Tag> find_unclaimed(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const;

  // Any thread: consumes arrived records, pushes queued sends and runs
  // pending pulls, each part only if no other thread is at it. Non-blocking;
  // returns whether anything moved.
  bool progress();
  // The device's thread, before it sleeps: asks the peer for a doorbell on
  // anything that would give this connection work. Returns false (and asks
  // nothing) when there is work already.
  bool arm_doorbells();
  // A caller is about to poll: no doorbells wanted.
  void disarm_doorbells();

  // The device's thread: the side socket is readable (goodbye, abort, end of
  // stream). Returns true at the end of the stream: stop watching it.
  bool on_side_readable();

  // Abort: fails every request of the connection with `error`, withdraws every
  // pull offer, tells the peer why (best effort). Afterwards no user buffer
  // or Request is touched.
  void fail_everything(std::exception_ptr error, std::span<const std::byte> abort_message);
  // Orderly close.
  size_t pending_requests();
  void send_goodbye();
  // Liveness over the side channel (Pair::send_liveness_probe); answered by the peer's progress thread.
  void send_probe(uint64_t probe, uint64_t group);
  bool probe_answered(uint64_t probe) const { return probe_answers_.answered(probe); }
  std::optional<uint64_t> answered_position(uint64_t probe, uint64_t group) const {
    return probe_answers_.position(probe, group);
  }

 private:
  struct Outgoing {
    Request* request = nullptr;
    Tag tag;
    std::span<const std::byte> data;
    size_t written = 0;  // eager: bytes already in the ring
    bool started = false;
    bool pull = false;
  };
  // A message that arrived before its receive was posted. An eager one
  // charges its length against max_unexpected_bytes; a pull offer holds no
  // bytes and charges nothing.
  struct Unexpected : Arrival {
    std::vector<std::byte> payload;  // eager: grows as records arrive, never beyond what arrived
    bool complete = false;
    bool pull = false;               // pull: only the offer arrived
    uint64_t address = 0;
    uint32_t slot = 0;
    uint64_t generation = 0;
    // TagMatching keeps it for the next message, with its buffer, unless the buffer is large.
    bool reuse() {
      payload.clear();
      complete = pull = false;
      return payload.capacity() <= (size_t{1} << 20);
    }
  };
  struct Pull {
    Request* request = nullptr;
    std::span<std::byte> destination;
    uint64_t address = 0;
    uint32_t slot = 0;
    uint64_t generation = 0;
    size_t copied = 0;
    // When the sender was seen withdrawing the offer (it aborted); zero before.
    Clock::time_point withdrawn_at{};
  };

  // Sending (send_mutex_ held).
  bool pull_locked(const Tag& tag, size_t bytes);
  // One call writes at most kFlushBudgetRings rings' worth of payload, then
  // lets the lock go and leaves the rest to the device's thread: a
  // post_send of a large message returns before it is through even when a
  // fast receiver keeps the ring empty. A flush also stops at the next
  // record once the device has failed, so abort(), which takes send_mutex_,
  // never waits for a whole message. (One ring's worth measured 5-13%
  // slower at 8 MiB, 4 ranks on 2 cores: more of each call's sends went to
  // the device's thread.)
  static constexpr size_t kFlushBudgetRings = 16;
  bool flush_locked();
  bool write_outgoing_locked(Outgoing& message, size_t& budget);
  void ring_peer_doorbell();
  // Receiving: takes consumer_ (or, without wait_for_lock, gives up when another thread holds it).
  bool consume(bool wait_for_lock = false);
  void on_message(const RingReader::Record& record);
  void on_more(const RingReader::Record& record);
  void on_pull(const RingReader::Record& record);
  void on_pulled(const RingReader::Record& record);
  void land(std::span<const std::byte> bytes);
  void finish_incoming();
  // A posted receive took an eager message of `bytes` (mutex_ held).
  void claimed_eager(size_t bytes) { we_claimed_->fetch_add(bytes, std::memory_order_release); }
  // Pulls (puller_ held).
  bool run_pulls();
  std::exception_ptr finish_pull(Pull& pull);

  // Stops receiving and leaves `reason` for whoever lets go of its lock to report.
  void fail_later(std::exception_ptr reason, LogLevel level = LogLevel::warn);
  void report_later_failure();
  void corrupt(const std::string& what);
  std::exception_ptr closed_error(const std::string& detail) const;
  size_t pending_requests_locked() const;

  ConnectionOwner& owner_;
  const int peer_rank_;
  const pid_t peer_pid_;
  const std::string peer_label_;
  Fd side_;
  Fd peer_doorbell_;
  Segment segment_;
  const bool peer_pulls_;
  const bool we_pull_;
  const size_t pull_threshold_;
  const size_t eager_window_;

  // Sending.
  std::mutex send_mutex_;
  RingWriter out_;
  std::deque<Outgoing> send_queue_;
  std::deque<std::pair<uint32_t, uint64_t>> pulled_notes_;  // (slot, generation) to confirm to the peer
  std::atomic<uint64_t>* offered_slots_;                    // ours: the pulls we offer
  std::array<Request*, kPullSlots> awaiting_pull_{};
  std::vector<uint32_t> free_slots_;
  std::atomic<size_t> outgoing_waiting_{0};  // send_queue_ + pulled_notes_, for lock-free idle checks
  uint64_t next_generation_ = 1;
  bool write_broken_ = false;
  uint64_t eager_bytes_sent_ = 0;                  // to this peer, ever
  const std::atomic<uint64_t>* peer_claimed_ = nullptr;  // ...of which its receives took (the peer writes it)

  // Receiving bookkeeping.
  mutable std::mutex mutex_;
  TagMatching<Unexpected> matching_;
  std::deque<Pull> pulls_;
  std::atomic<size_t> pulls_waiting_{0};  // pulls_.size(), for lock-free idle checks
  bool failed_ = false;
  bool peer_said_goodbye_ = false;
  ProbeAnswers probe_answers_;
  std::atomic<bool> peer_gone_{false};  // peer_said_goodbye_, for post_send without mutex_
  bool we_said_goodbye_ = false;
  std::atomic<size_t> receives_waiting_{0};
  std::atomic<uint64_t>* we_claimed_ = nullptr;  // eager bytes from the peer our receives took (mutex_)

  // The receive state machine: only the holder of consumer_.
  std::mutex consumer_;
  RingReader in_;
  std::atomic<uint64_t>* peer_slots_;  // theirs: the pulls they offer us
  bool in_message_ = false;
  Tag incoming_tag_;
  uint64_t incoming_total_ = 0;
  uint64_t incoming_landed_ = 0;
  Request* incoming_request_ = nullptr;   // the posted receive being filled, or null...
  std::byte* incoming_target_ = nullptr;  // ...its buffer
  Unexpected* incoming_unexpected_ = nullptr;  // ...else the message kept for a later receive

  // Pulls: only the holder of puller_.
  std::mutex puller_;

  // A failure found while holding consumer_ or puller_, reported after.
  DeferredFailure later_failure_;
  std::atomic<bool> receiving_{true};
};

}  // namespace chorus::transport::shm
