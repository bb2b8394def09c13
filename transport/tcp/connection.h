// One TCP connection to one peer: the send queue, the receive state machine
// that lands payloads in posted user buffers (or buffers frames nobody has
// asked for yet), and the Pair handle the Context holds.
//
// Threads: a user thread posts (one at a time per pair) while the device's
// progress thread reads and flushes queued sends. `mutex_` guards everything
// both touch. The receive state machine belongs to whichever thread holds
// `reader_`: the progress thread, or a waiting caller that reads for itself
// (read_from_caller) to skip the thread hand-off; reads into user memory
// happen without `mutex_`. A reader never aborts the device while it holds
// `reader_` (abort's cleanup takes it): it records the error and reports it
// after letting go.
//
// The eager window. Every message goes eagerly (a data frame) and a
// receiver keeps what arrives before its receive is posted, up to
// CHORUS_MAX_UNEXPECTED_BYTES. A sender running ahead of its receiver's
// posted receives (a 3 GiB allreduce between 2 ranks did) would fill that
// and fail the job, so the receiver reports the eager bytes its receives
// took (`claimed` frames, every quarter window), and a sender whose eager
// bytes sent exceed the last report by more than the window (transport/
// tag_matching.h) announces its next messages instead: an `announce` frame
// with the tag and length, held by the receiver at no more than
// kAnnouncementCharge against the limit; once a receive takes it, the
// receiver sends `clear`, and the sender then sends the message as
// `announced_data`, which lands straight in the posted buffer. Point-to-
// point sends (Tag::eager) never wait. docs/failures.md has the limit.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <set>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/log.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/socket.h"
#include "transport/deferred_failure.h"
#include "transport/engine_core.h"
#include "transport/positions.h"
#include "transport/tag_matching.h"
#include "transport/transport.h"

namespace chorus::transport::tcp {

class Connection;

// What a connection needs from its device, beyond what every transport's does.
class ConnectionOwner : public CommonConnectionOwner {
 public:
  // Aborts the whole device. Never called with a connection's mutex held.
  virtual void abort(std::exception_ptr reason, LogLevel level) = 0;
  virtual bool shutting_down() const = 0;
  virtual void set_write_interest(Connection& connection, bool writable) = 0;
  virtual void stop_watching(Connection& connection) = 0;

 protected:
  ~ConnectionOwner() = default;
};

class Connection {
 public:
  Connection(ConnectionOwner& owner, int peer_rank, int stream, SocketAddress peer_address, AdmittedSocket socket);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int peer_rank() const { return peer_rank_; }
  // Pair::peer_closed.
  bool peer_closed() const { return peer_closed_.load(std::memory_order_acquire); }
  // Which of the connections to this peer (Device::connect's `stream`).
  int stream() const { return stream_; }
  int fd() const { return fd_.get(); }
  // "peer rank 3 (10.0.0.3:41234)", "peer rank 3 (10.0.0.3:41234, stream 1)"
  const std::string& peer_label() const { return peer_label_; }

  // User side (host memory only; the device accepts nothing else).
  void post_send(Request& request, Tag tag, std::span<const std::byte> data);
  void post_recv(Request& request, Tag tag, std::span<std::byte> data);
  // only_if_arrived: Pair::post_recv_if_arrived (returns whether it posted).
  bool post_recv(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived);
  // Pair::find_unclaimed.
  std::optional<Tag> find_unclaimed(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const;

  // Progress thread.
  void on_readable();
  // Reads what TLS holds already read off the socket, if anything (after connect).
  void read_buffered_input() {
    if (tls_ && tls_->buffered_input()) on_readable();
  }
  // Any waiting thread: reads what has already arrived if this pair has a
  // receive pending or a sent announcement waiting for its clear, and no
  // other thread is reading it. A parked pair with neither (the progress
  // thread left its reading to the polling callers) is read only when
  // `sweep_idle`: bytes nobody waits for (an abort frame, a claimed report,
  // a peer running ahead) can wait a few tens of µs, and reading every
  // idle peer on every poll cost a system call per peer per poll.
  // Non-blocking; returns whether any bytes were consumed.
  bool read_from_caller(bool sweep_idle);
  // Whether read_from_caller(sweep_idle) would read; the socket's number
  // (fixed for the connection's life: a stale one costs a spurious read
  // attempt, never a missed one) for one poll() over several; whether only
  // a read can tell (TLS may hold decrypted bytes the socket no longer shows).
  bool wants_caller_read(bool sweep_idle) const {
    if (!reading_.load(std::memory_order_relaxed)) return false;
    return receives_waiting_.load(std::memory_order_relaxed) > 0 ||
           clears_awaited_.load(std::memory_order_relaxed) > 0 ||
           (sweep_idle && parked_.load(std::memory_order_acquire));
  }
  int socket_number() const { return socket_number_; }
  // Whether sends wait in the queue for the socket to take them (the
  // progress thread writes them as it becomes writable).
  bool sends_queued() const { return sends_queued_.load(std::memory_order_relaxed); }
  bool readiness_hidden() const { return tls_ != nullptr; }

  // The device's epoll bookkeeping for this socket, guarded by the device's
  // polling mutex. `parked`: EPOLLIN is off because callers are polling.
  struct EpollInterest {
    bool parked = false;
    bool writable = false;
  };
  EpollInterest& epoll_interest() { return epoll_interest_; }
  void set_parked(bool parked) { parked_.store(parked, std::memory_order_release); }
  void on_writable();

  // Abort cleanup, on the progress thread (or once it has stopped): fails
  // every request of this pair with `error`, sends `abort_frame` if the
  // stream is at a frame boundary (waiting at most until `give_up`), and
  // half-closes the socket. Afterwards no user buffer or Request is touched.
  void fail_everything(std::exception_ptr error, std::span<const std::byte> abort_frame,
                       Clock::time_point give_up);

  // Orderly close (device destructor).
  size_t pending_requests();
  void send_goodbye();
  // Liveness (Pair::send_liveness_probe): a probe frame out, and whether its answer came back.
  void send_probe(uint64_t probe, uint64_t group);
  bool probe_answered(uint64_t probe) const { return probe_answers_.answered(probe); }
  std::optional<uint64_t> answered_position(uint64_t probe, uint64_t group) const {
    return probe_answers_.position(probe, group);
  }
  bool send_queue_empty();
  // The bytes this side wrote that the peer's kernel has not acknowledged
  // (SIOCOUTQ; 0 once the socket is closed or broken). Closing a
  // socket that still holds unread bytes (a liveness probe that came in
  // late, say) resets the connection, and a reset throws away what this
  // side's kernel had not yet delivered: the tail of this rank's last
  // message, which a slower peer was still receiving.
  size_t undelivered_bytes();
  // After the progress thread stopped: half-close, drop what the peer still
  // sent (closing with unread bytes would reset the connection), close.
  void close_socket();

 private:
  struct OutgoingFrame {
    Request* request = nullptr;  // null for control frames
    EncodedHeader header{};
    std::span<const std::byte> payload;
    std::vector<std::byte> owned_payload;  // control frames only
    size_t written = 0;                    // of header + payload
    Tag tag;
  };
  // Bytes allocated as they come, in chunks that never move, and never
  // zeroed: an unexpected message is copied out again once its receive is
  // posted, and zero-filling (a vector's resize) cost a memset and fresh
  // page faults per byte besides. A message that outgrows its chunks gets
  // one more (the total doubles) instead of a copy of all that arrived,
  // which cost a 16 MiB allgather over tcp a tenth of a rank's time.
  class UnexpectedBytes {
   public:
    size_t capacity() const { return capacity_; }
    // Appends a chunk of `bytes` and returns its start. Throws std::bad_alloc.
    std::byte* add_chunk(size_t bytes);
    // Copies the first `bytes` (no more than arrived) to `out`.
    void copy_to(std::byte* out, size_t bytes) const;

   private:
    struct Chunk {
      std::unique_ptr<std::byte[]> bytes;
      size_t size = 0;
    };
    std::vector<Chunk> chunks_;
    size_t capacity_ = 0;
  };
  // A data frame that arrived before its receive was posted; its `bytes`
  // (what the header announced) count against max_unexpected_bytes.
  struct UnexpectedMessage : Arrival {
    UnexpectedBytes payload;  // grows with the bytes that really arrive, up to `bytes`
    bool complete = false;
    bool announced = false;     // only its announcement arrived: a receive clears it
    uint64_t announcement = 0;  // ...its number
  };
  // What an announcement costs against max_unexpected_bytes: a peer cannot
  // make this rank keep announcements without limit either.
  static constexpr size_t kAnnouncementCharge = 1024;
  // A message this rank announced, waiting for the peer's clear.
  struct Announced {
    Request* request = nullptr;
    Tag tag;
    std::span<const std::byte> data;
  };
  // An announcement this rank cleared, waiting for its data.
  struct Cleared {
    Request* request = nullptr;
    std::span<std::byte> buffer;
  };
  enum class Sink { user_buffer, unexpected, abort_text, announcement };

  // Writes queued frames until done or the socket is full; 0 or an errno. Holds mutex_.
  int flush_locked();
  // The same through TLS: one record at a time, a frame's header sealed with
  // the start of its payload so a small message is one record.
  int flush_tls_locked();
  // Moves the queue past `sent` bytes, completing the sends that are whole.
  void advance_send_queue_locked(size_t sent);
  // recv/readv and send on the socket or through TLS: bytes, 0 at the end, or -1 and errno.
  ssize_t read_some(iovec* iov, int count);
  ssize_t write_some(const std::byte* data, size_t bytes);
  std::exception_ptr write_error(int error);
  // A reset seen while writing may be racing an abort frame the peer sent
  // before it went away; the reader sees both in order, so it reports.
  bool leave_reset_to_reader_locked(int error);
  void update_write_interest_locked();

  // The receive state machine; the caller holds reader_. Returns whether any bytes were consumed.
  bool read_available();
  // Stops reading and leaves `reason` for whoever releases reader_ to report.
  void abort_after_read(std::exception_ptr reason, LogLevel level);
  // Releases reader_, then aborts the device with the recorded error, if any.
  void release_reader(std::unique_lock<std::mutex>& reader);
  void consume(const std::byte* data, size_t length);
  // Bytes the payload being received may take at payload_target_ now; grows
  // an unexpected message's buffer when it is full (0 once reading stopped).
  size_t writable_now();
  // The unexpected message arriving now was claimed by a receive: what
  // arrived is copied there once and the rest lands in it directly.
  void land_claimed_in_place();
  void on_header();
  void begin_data_payload();
  void finish_payload();
  void on_goodbye();
  // The eager window (the header comment). Sending side, mutex_ held:
  bool over_eager_window_locked(size_t bytes) const;
  void queue_announcement_locked(Request& request, Tag tag, std::span<const std::byte> data);
  // Receiving side: an announcement arrived; the peer cleared one of ours;
  // the data of one we cleared begins; the peer's claimed total.
  void on_announcement();
  void on_clear();
  void begin_announced_data();
  void on_claimed();
  // mutex_ held: a posted receive takes announcement `number` (tells the
  // peer to send it), or `bytes` of an eager message (counted for the peer).
  void clear_locked(uint64_t number, const PostedReceive& receive);
  void claimed_eager_locked(size_t bytes);
  // Queues a frame without payload (probes and their answers: the probe's
  // number, the group it asks about, the answer's position). Holds mutex_.
  void queue_control_locked(FrameKind kind, uint64_t tag_value, uint64_t group = 0, uint64_t signature = 0);
  void on_end_of_stream(int error);
  void corrupt(const std::string& what);
  Tag frame_tag() const { return {frame_.tag_value, frame_.tag_signature, frame_.tag_group}; }
  std::exception_ptr closed_context_error(const char* doing) const;
  size_t pending_requests_locked() const;
  std::string receiving_text() const;

  ConnectionOwner& owner_;
  const int peer_rank_;
  const int stream_;
  const SocketAddress peer_address_;
  const std::string peer_label_;
  Fd fd_;
  const int socket_number_;
  // After fd_, so the session goes before the socket closes. Null without TLS.
  std::unique_ptr<TlsSession> tls_;
  std::vector<std::byte> tls_record_;  // flush_tls_locked's header + payload start (mutex_)

  mutable std::mutex mutex_;
  std::deque<OutgoingFrame> send_queue_;
  TagMatching<UnexpectedMessage> matching_;
  bool write_interest_ = false;
  std::atomic<bool> sends_queued_{false};  // write_interest_, read without mutex_
  bool failed_ = false;          // fail_everything ran
  bool write_broken_ = false;    // EPIPE/ECONNRESET while writing; the reader reports it
  bool peer_said_goodbye_ = false;
  std::atomic<bool> peer_closed_{false};  // peer_said_goodbye_, read without mutex_
  bool we_said_goodbye_ = false;
  // The eager window's books (mutex_), and what the peer last said it took.
  const size_t eager_window_;
  uint64_t eager_bytes_sent_ = 0;
  uint64_t next_announcement_ = 1;
  std::map<uint64_t, Announced> announced_;
  std::map<uint64_t, Cleared> cleared_;
  std::set<uint64_t> open_announcements_;  // the peer's, kept or cleared, their data not yet begun
  uint64_t claimed_bytes_ = 0;
  uint64_t claimed_reported_ = 0;
  std::atomic<uint64_t> peer_claimed_{0};

  // Receive state machine: only the holder of reader_ (taken before mutex_).
  std::mutex reader_;
  // Receives posted and not yet landed, and announcements sent and not yet
  // cleared (announced_.size()): a caller polls a pair on every poll only
  // while it has some.
  std::atomic<size_t> receives_waiting_{0};
  std::atomic<size_t> clears_awaited_{0};
  DeferredFailure after_read_;
  std::atomic<bool> reading_{true};
  std::atomic<bool> parked_{false};
  ProbeAnswers probe_answers_;
  EpollInterest epoll_interest_;
  bool in_payload_ = false;
  EncodedHeader header_bytes_{};
  size_t header_received_ = 0;
  FrameHeader frame_;
  Sink sink_ = Sink::user_buffer;
  std::byte* payload_target_ = nullptr;
  size_t payload_remaining_ = 0;
  Request* receiving_request_ = nullptr;          // posted receive being filled in place
  UnexpectedMessage* receiving_unexpected_ = nullptr;
  // Set (under mutex_) when a receive claims receiving_unexpected_ while its
  // payload arrives; the reader sees it without taking mutex_ per read.
  std::atomic<bool> claimed_while_arriving_{false};
  std::vector<std::byte> abort_text_;
  std::array<std::byte, kAnnouncementBytes> announcement_{};
  std::vector<std::byte> staging_;
};

}  // namespace chorus::transport::tcp
