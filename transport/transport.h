// The transport seam. Every transport (tcp, shm, ibverbs; cuda_ipc later)
// implements Device and Pair; algorithms see nothing else of it. A Context
// holds one Device per transport it uses and, per peer, the Pairs of the one
// transport that serves that peer (transport/mesh.h; the choice is made by
// transport/registry.h).
//
// The caller owns each Request and keeps it alive until it completes or the
// Device is aborted. Posting is non-blocking; completion is reported by the
// Request's state and by the CompletionSignal the caller attached before
// posting, so one thread can wait for "any of my requests" without polling
// each one. The signal must outlive its requests: its destructor waits for a
// transport thread that is still inside a completion, which is what makes it
// safe to destroy a Request as soon as it is seen finished.
//
// Failure model: the first error on any Pair (peer closed, reset, hostile
// bytes, mismatched frame) aborts the whole Device. Every pending Request then
// fails with that error and every later post fails at once. A collective
// library cannot continue after losing a peer, and failing everything keeps a
// rank from waiting on a neighbour that is itself waiting on the dead peer.
// The Mesh spreads a Device's failure to the other Devices of the Context
// (set_failure_listener, abort_async), so it ends every transport at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/deadline.h"
#include "base/link_model.h"
#include "base/memory.h"
#include "base/peer_order.h"
#include "transport/knock.h"
#include "transport/registration.h"

namespace chorus::transport {

// The most an export_memory description takes (Device::export_memory).
inline constexpr size_t kMaxExportedMemoryBytes = 128;

// Messages match on (`group`, `value`) (per pair, per direction, FIFO among
// equal tags). `group` names the Context a message belongs to: a child made by
// Context::split shares its parent's pairs, and the group keeps their
// collectives apart even when both are numbered the same. `signature`
// describes the call that produced the message (collective, type, count...):
// a receive whose signature differs from the arriving frame's fails with
// MismatchError instead of landing bytes of the wrong call.
struct Tag {
  uint64_t value = 0;
  uint64_t signature = 0;
  uint64_t group = 0;
  // Sends only; neither matched nor sent. The send must finish without
  // waiting for the peer to post its receive (a point-to-point send, which
  // the API promises finishes once the transport holds the data). A
  // transport whose large sends otherwise wait for the receiver (shm's
  // single-copy pulls) moves such a message through its own buffers.
  bool eager = false;
};

// Pair::find_unclaimed's test of a message's tag.
using UnclaimedFilter = std::function<bool(const Tag&)>;

// What receives match on, as a hash-map key.
struct TagKey {
  uint64_t group = 0;
  uint64_t value = 0;
  explicit TagKey(const Tag& tag) : group(tag.group), value(tag.value) {}
  TagKey(uint64_t group_, uint64_t value_) : group(group_), value(value_) {}
  friend bool operator==(const TagKey&, const TagKey&) = default;
};
struct TagKeyHash {
  size_t operator()(const TagKey& key) const {
    return static_cast<size_t>(key.value * 0x9E3779B97F4A7C15ull ^ (key.group + 0x632BE59BD9B4E019ull));
  }
};
// "tag 0x100000003", "tag 0x100000003 of group 0x5d1c..." for error messages.
std::string describe_tag(uint64_t group, uint64_t value);

// Wakes its waiters when any of the requests attached to it completes (or bump() counts another event).
class CompletionSignal {
 public:
  CompletionSignal() = default;
  CompletionSignal(const CompletionSignal&) = delete;
  CompletionSignal& operator=(const CompletionSignal&) = delete;
  ~CompletionSignal();
  uint64_t count() const { return count_.load(std::memory_order_acquire); }
  // Returns once count() != seen or the deadline passed; returns count().
  uint64_t wait_change(uint64_t seen, Deadline deadline);
  // Counts an event that is no request's completion and wakes the waiters:
  // an arrival (ArrivalNotifier), a failure of the Mesh.
  void bump();

 private:
  std::atomic<uint64_t> count_{0};
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable cv_;

  friend class Request;
  // Runs publish (which makes a request's new state visible) and bumps the
  // count under the mutex, so nothing touches the request after publish.
  template <class Publish>
  void notify(Publish&& publish);
};

class Request {
 public:
  enum class State : uint8_t { idle, pending, done, failed };

  State state() const { return state_.load(std::memory_order_acquire); }
  bool finished() const { State s = state(); return s == State::done || s == State::failed; }
  std::exception_ptr error() const { return error_; }  // valid once state() == failed
  // Required before the first post; the signal must outlive the request.
  void attach(CompletionSignal* signal) { signal_ = signal; }
  CompletionSignal* signal() const { return signal_; }

  // Transport side.
  void mark_pending() {
    before_peers_hear();
    error_ = nullptr;
    state_.store(State::pending, std::memory_order_release);
  }
  void complete();
  void fail(std::exception_ptr error);

  // Blocks until finished; throws the request's error, or TimeoutError
  // whose message is `what` ("rank 0: timed out after 5 s waiting for ...").
  void wait(Deadline deadline, const std::string& what);

 private:
  std::atomic<State> state_{State::idle};
  std::exception_ptr error_;
  CompletionSignal* signal_ = nullptr;
};

// How a transport tells a receive from any peer (chorus::recv_any) that a
// message arrived which no posted receive took, so that
// Pair::post_recv_if_arrived may now claim it. A transport keeps one in its
// core and calls notify() whenever it starts buffering such a message (at
// its header: the claim may come before the payload is complete). The
// signal is shared because a transport's core may outlive its Device handle.
// Cheap while nobody watches: one atomic load.
class ArrivalNotifier {
 public:
  void watch(std::shared_ptr<CompletionSignal> signal);  // null: stop
  void notify();

 private:
  std::atomic<bool> watched_{false};
  std::mutex mutex_;
  std::shared_ptr<CompletionSignal> signal_;
};

// One connected peer. Posting is thread-safe: the Contexts split from one
// Context share its Pairs, and their collectives may run on different threads.
class Pair {
 public:
  virtual ~Pair() = default;
  virtual int peer_rank() const = 0;
  // Sends data (not copied: it must stay valid until the request finishes).
  // `memory` says where it lives; the Pair's Device must accept it (a
  // precondition the callers check once, asserted by the transports).
  virtual void post_send(Request& request, Tag tag, std::span<const std::byte> data, Memory memory) = 0;
  // Receives a message of exactly data.size() bytes straight into data.
  // A message of another length fails with MismatchError.
  virtual void post_recv(Request& request, Tag tag, std::span<std::byte> data, Memory memory) = 0;
  // post_recv, but only where a message with this tag from the peer has
  // already arrived (announced at least: it may still be arriving) and no
  // receive took it yet: then it is posted exactly as post_recv would post
  // it (the same FIFO order, MismatchError for another length) and true is
  // returned; so it is where the device has failed (the request fails as
  // post_recv's would). Otherwise nothing is posted, the request stays idle
  // and false comes back. Checking and claiming happen under the pair's own
  // lock, so no receive posted meanwhile by another thread can take the
  // message in between: this is what makes a receive from any peer safe
  // beside concurrent specific receives without serializing them.
  // Messages arriving while nobody claims them are reported to the
  // Device's arrival watcher (Device::watch_arrivals).
  virtual bool post_recv_if_arrived(Request& request, Tag tag, std::span<std::byte> data, Memory memory) = 0;
  // Whether the peer has closed its context (its goodbye came): a send to
  // it now fails the whole device. For a message that may go unsaid (the
  // late root checks', algorithms/execution/late_root_checks.h); a
  // transport that cannot tell says false.
  virtual bool peer_closed() const { return false; }
  // The tag of the oldest message from the peer in `group` that no receive
  // has taken (arrived, or announced and still arriving) and that `wanted`
  // accepts, looking at the group's `oldest` oldest messages only (a
  // sender far ahead may have thousands waiting); nullopt where there is
  // none. Nothing is claimed. For checks that look for a message no call
  // of this rank will ever take, which stays the oldest of its kind (a
  // frame of a call this rank has finished, late_root_checks.h). `wanted`
  // runs under the transport's lock: it must not call into the transport.
  // A transport that cannot tell finds none.
  virtual std::optional<Tag> find_unclaimed(uint64_t /*group*/, size_t /*oldest*/, const UnclaimedFilter& /*wanted*/) const {
    return std::nullopt;
  }

  // Liveness. The peer's progress (its transport thread, or a caller
  // polling) answers a probe whatever its application is doing, so a probe
  // left unanswered for long means a process that is stopped (SIGSTOP, a
  // debugger) or whose progress is stuck, not merely busy. Probes are
  // numbered upwards; answered(n) covers every probe up to n. Never blocks,
  // never throws: a broken connection just leaves the probe unanswered.
  // A probe asks where the peer is in `group` (transport/positions.h); the
  // answer carries it, read from the peer's DeviceOptions::positions.
  virtual void send_liveness_probe(uint64_t probe, uint64_t group) = 0;
  virtual bool liveness_answered(uint64_t probe) const = 0;
  // The encoded position the peer reported for `group` in its answer to
  // `probe` or a later probe about that group; nullopt until one came.
  virtual std::optional<uint64_t> answered_position(uint64_t probe, uint64_t group) const = 0;

  // One-sided access to memory the peer registered with its device and
  // described to this rank (Registration::remote, exchanged by the caller):
  // put writes `data` there, get reads it into `data`; neither involves the
  // peer's application. A put completes once the bytes are in the peer's
  // memory. Only where one_sided() says so; elsewhere the request fails.
  virtual bool one_sided() const { return false; }
  virtual void post_put(Request& request, std::span<const std::byte> data, RemoteMemory target);
  virtual void post_get(Request& request, std::span<std::byte> data, RemoteMemory source);

  // Host memory, the common case.
  void post_send(Request& request, Tag tag, std::span<const std::byte> data) {
    post_send(request, tag, data, Memory::host());
  }
  void post_recv(Request& request, Tag tag, std::span<std::byte> data) {
    post_recv(request, tag, data, Memory::host());
  }
};

// Memory that every rank of one host maps: what a collective on small
// buffers exchanges through, one flag and its data per rank, instead of
// messages (algorithms/shared_memory/board.h). One rank creates it and hands its
// description to the others over the job's authenticated path; each of them
// opens it. The mapping lasts as long as this object.
class SharedRegion {
 public:
  virtual ~SharedRegion() = default;
  virtual std::byte* data() const = 0;
  virtual size_t size() const = 0;
  // What a peer passes to its Device::open_shared_region (at most
  // kMaxExportedMemoryBytes). Only the creator's describes anything.
  virtual std::vector<std::byte> description() const = 0;
  // Once every rank has opened it: nobody else can open it any more (the
  // creator stops sharing it), and it goes away with the last mapping.
  virtual void seal() {}
};

// One per Context per transport: listens, owns the progress engine.
class Device {
 public:
  virtual ~Device() = default;
  // The transport's name as CHORUS_TRANSPORT spells it ("tcp", "shm").
  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  // Opaque blob the bootstrap hands every other rank.
  virtual std::vector<std::byte> address() const = 0;
  // Checks a peer's published address before anyone connects: decodes it
  // and compares what both ends must agree on (a stream count, a wire
  // version). Every rank checks before dialing anyone, so a disagreement
  // fails on every rank at once instead of leaving some waiting for a peer
  // that already gave up. Throws InvalidArgument naming both ranks.
  virtual void check_peer(int peer_rank, std::span<const std::byte> peer_address) const = 0;
  // Independent connections this device keeps per peer; connect() builds
  // each with its `stream` (0..streams()-1). Each has its own message order,
  // so a large message striped over them moves in parallel.
  virtual int streams() const { return 1; }
  // Builds the connection to one peer. Both sides call it; the transport
  // decides who dials (dials() says which). Throws IoError/TimeoutError
  // naming the peer. Where this rank waits for the peer to dial, a
  // TimeoutError changes nothing: calling again with a later deadline goes
  // on waiting (connections on demand wait in short slices, transport/mesh.h).
  virtual std::unique_ptr<Pair> connect(int peer_rank, std::span<const std::byte> peer_address,
                                        Deadline deadline, int stream = 0) = 0;
  // Whether this rank dials `peer_rank` (true) or waits for it to dial. Every
  // transport of this build has the higher rank dial.
  virtual bool dials(int peer_rank) const { return rank() > peer_rank; }
  // What the peer's listener says (transport/knock.h), for a rank waiting for
  // it to dial: alive, aborted, or gone. unknown where the transport cannot tell.
  virtual KnockAnswer knock(int /*peer_rank*/, std::span<const std::byte> /*peer_address*/) const {
    return KnockAnswer::unknown;
  }
  // Alpha and beta of the link to a peer whose address check_peer accepted
  // (connected or not), for algorithm selection.
  virtual LinkModel link_model(int peer_rank) const = 0;
  // Every message that arrives with no receive posted for it (the ones
  // Pair::post_recv_if_arrived can claim) bumps `signal`, so a receive from
  // any peer sleeps until there is something new to look at instead of
  // polling. Null stops it. The Mesh sets it before connecting.
  virtual void watch_arrivals(std::shared_ptr<CompletionSignal> signal) = 0;
  // Whether this device moves buffers of that memory (host for tcp and shm).
  virtual bool accepts(const Memory& memory) const { return memory.kind == MemoryKind::host; }

  // Registers [data, data + size) for this transport (RDMA memory regions,
  // CUDA IPC handles) and returns the handle; dropping the last reference
  // to it deregisters. Transports that move memory without registering (tcp,
  // shm) return a handle that holds nothing. Transports that need it keep a
  // RegistrationCache (transport/registration.h) so a training loop's buffers
  // are registered once, not per message.
  virtual std::shared_ptr<Registration> register_memory(std::span<const std::byte> data, Memory memory);

  // Whether this device's listener can be reached from another host (a TCP
  // port on a routable address, an RDMA device): what a job without a secret
  // leaves open to the network. Loopback and unix sockets cannot.
  virtual bool listens_beyond_host() const { return false; }

  // Peer memory mapped into this process: where a device maps its peers'
  // memory of a kind (CUDA IPC maps a peer process's device allocation), a
  // collective on that memory may read and write the peers' buffers itself
  // instead of messaging them (algorithms/shared_memory/mapped_allreduce.h).
  virtual bool maps_peer_memory(const Memory& /*memory*/) const { return false; }
  // An opaque description of `data` (at most kMaxExportedMemoryBytes) that
  // the peer passes to its own map_peer_memory. Only where maps_peer_memory.
  virtual std::vector<std::byte> export_memory(std::span<const std::byte> data, const Memory& memory);
  // The local address of the range a peer exported; mapped once per
  // allocation and kept until the device closes. The description is checked:
  // a malformed or hostile one is an error naming the peer.
  virtual std::byte* map_peer_memory(int peer_rank, std::span<const std::byte> exported, const Memory& memory);

  // A region of `bytes` shared with the peers of this host that this device
  // serves (SharedRegion); null where the transport shares no memory.
  // Throws IoError where it should and could not.
  virtual std::unique_ptr<SharedRegion> create_shared_region(size_t /*bytes*/) { return nullptr; }
  // Opens the region `peer_rank` created and described. The description is
  // checked (a malformed or hostile one, or one naming another process than
  // the peer's, is an error naming the peer), as is the size: `bytes`.
  virtual std::unique_ptr<SharedRegion> open_shared_region(int peer_rank, std::span<const std::byte> description,
                                                           size_t bytes);

  // Fails every pending request with `reason`, tells connected peers why
  // (best effort) and fails every later post. Synchronous: once it returns the
  // transport touches no posted buffer again. Idempotent: the first reason wins.
  virtual void abort(std::exception_ptr reason) = 0;
  // The same without waiting: the failure is recorded (later posts fail at
  // once) and the transport's own thread fails the pending requests soon
  // after. Safe from any thread, including another transport's progress
  // thread, which abort() is not (two progress threads aborting each other
  // synchronously would wait for each other forever).
  virtual void abort_async(std::exception_ptr reason) = 0;
  // The error that aborted the device, or null.
  virtual std::exception_ptr failure() const = 0;
  // Called from inside the failure listener: tell the connected peers
  // `reason` instead of failure() when this device relays its abort. The
  // Mesh uses it where it explained a lost peer with that peer's own abort
  // report (Mesh::explain_loss): otherwise a peer that merely saw the
  // connection close would pass its bare "closed" on to every rank it
  // relays to. No effect once the device began telling its peers.
  virtual void relay_instead(std::exception_ptr /*reason*/) {}
  // Called once, on the thread that failed the device (maybe its progress
  // thread), right after failure() is set, whatever failed it: a peer, an
  // abort. Must not block. Set before connecting; set null (which waits for
  // a call in progress) before destroying whatever the listener touches.
  void set_failure_listener(std::function<void(std::exception_ptr)> listener);
  // Non-blocking: lands whatever has already arrived for this device's
  // pending receives on the calling thread, completing their requests there.
  // A waiter that calls it while it spins saves the hand-off from the
  // transport's thread. Returns whether any bytes were consumed. Safe from
  // any thread, concurrently with the transport's own progress and abort.
  // Never blocks or yields: when to give the CPU away is the waiter's policy.
  virtual bool progress() { return false; }
  // Sleeps until bytes arrive for one of this device's pending receives (or
  // a queued send can move), for at most `limit`, and returns true; or
  // returns false at once, without sleeping, where nothing is pending or
  // the device cannot tell (shm and ibverbs; tcp with TLS, whose records
  // hide readiness). For a waiter on a host with more ranks than cores that
  // expects its bytes later rather than sooner (executor.cc): a system
  // call instead of a read and a yield per turn. Lands nothing: progress()
  // does, after.
  virtual bool await_arrival(std::chrono::microseconds limit) {
    (void)limit;
    return false;
  }
  // Bracket a stretch in which the calling thread keeps calling progress().
  // Meanwhile the transport's own thread leaves reading to the caller instead
  // of being woken for every arriving message: on a host with more ranks than
  // cores those wake-ups cost more than the messages (docs/latency.md).
  // end_polling() hands reading back, possibly a little later (tcp keeps
  // its sockets parked for a millisecond, for the next collective); a
  // caller about to sleep brackets the sleep with begin_waiting(), which
  // hands it back at once. Nested and concurrent scopes are counted.
  virtual void begin_polling() {}
  virtual void end_polling() {}
  // Bracket a stretch in which the calling thread sleeps until one of this
  // device's requests completes, polling nothing: the device must then make
  // progress on its own thread. tcp takes back the sockets polling callers
  // left parked; shm asks its peers for doorbells only while someone waits,
  // so back-to-back collectives that poll pay no wake-up system calls.
  virtual void begin_waiting() {}
  virtual void end_waiting() {}

 protected:
  // Transports call it once, outside their locks, when they first fail.
  void notify_failure(const std::exception_ptr& reason);

 private:
  std::mutex listener_mutex_;
  std::function<void(std::exception_ptr)> failure_listener_;
};

// Holds begin_polling() for its lifetime (of a Device, or of a Mesh's every Device).
template <class Polled>
class PollingScope {
 public:
  explicit PollingScope(Polled& polled) : polled_(polled) { polled_.begin_polling(); }
  ~PollingScope() { polled_.end_polling(); }
  PollingScope(const PollingScope&) = delete;
  PollingScope& operator=(const PollingScope&) = delete;

 private:
  Polled& polled_;
};

// Holds begin_waiting() for its lifetime.
template <class Waited>
class WaitingScope {
 public:
  explicit WaitingScope(Waited& waited) : waited_(waited) { waited_.begin_waiting(); }
  ~WaitingScope() { waited_.end_waiting(); }
  WaitingScope(const WaitingScope&) = delete;
  WaitingScope& operator=(const WaitingScope&) = delete;

 private:
  Waited& waited_;
};

}  // namespace chorus::transport
