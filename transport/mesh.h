// A Mesh is one rank's connections to every other rank of a job: every
// Device the rank uses (one per transport) and, per peer, the Pairs of the
// one transport that serves it (several Pairs where that transport keeps
// several streams per peer). A peer's Pairs exist from the start (a full
// mesh) or only once something needs them (connect(), on demand: a job of
// thousands of ranks whose ring uses two peers per rank must not hold a
// socket to every one). It is the failure domain: the first failure of
// any Device ends them all, so a rank waiting on a shared-memory peer learns
// at once that a TCP peer died. A Context and every Context split from it
// share one Mesh.
//
// Destruction order matters: the Pairs go before their Devices, and the
// Devices stop telling the Mesh about failures before anything is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/deadline.h"
#include "base/link_model.h"
#include "base/memory.h"
#include "transport/abort_record.h"
#include "transport/positions.h"
#include "transport/transport.h"

namespace chorus::transport {

class Mesh {
 public:
  // The transport serving one peer and its Pairs (streams), empty for this rank.
  struct Link {
    Device* device = nullptr;
    std::vector<std::unique_ptr<Pair>> streams;
  };

  // Takes the Devices that will serve some peer, before any of them
  // connects, so that failure spreading is in place from the start. Each
  // peer gets a route (set_route: its transport and published address) and
  // is connected by connect(), or gets ready Pairs at once (set_link, for
  // tests that build Pairs themselves).
  // `positions` is the table the Devices' probe answers read (DeviceOptions::
  // positions); null: the Mesh makes one of its own.
  Mesh(int rank, int size, std::vector<std::unique_ptr<Device>> devices,
       std::shared_ptr<PositionTable> positions = nullptr);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  void set_link(int peer, Link link);
  // Which Device serves `peer` and the address it published for it; the
  // Pairs come with connect().
  void set_route(int peer, Device* device, std::vector<std::byte> peer_address);

  // Builds the Pairs (every stream) to `peer` unless they exist, on the
  // calling thread, waiting at most until `deadline`; safe from several
  // threads at once. The Device decides who dials (the higher rank, in every
  // transport of this build), so a rank waits only for a higher one, and
  // that one dials as soon as it needs the pair itself: a collective's ranks
  // need each other alike, so none waits for long. A failure to connect is
  // a failure of the job: the Mesh is aborted with it (naming the peer)
  // before it is thrown, as a collective's transport error would be.
  void connect(int peer, Deadline deadline);
  // The same for several peers, in ascending order: dials (to lower ranks)
  // come before waits (for higher ones), so ranks connecting their sets at
  // once never wait in a circle.
  void connect(std::vector<int> peers, Deadline deadline);
  // Connects `peer` unless that means waiting for it: a peer this rank
  // dials is dialed (waiting at most until `deadline` for its listener);
  // one that dials this rank is taken only if its dial already came.
  // Returns whether the pair is up. How a receive from any peer (which
  // cannot know who will send) reaches peers on demand: a peer can only
  // have sent once its pair is up. Failures as connect(). `knock`: for a
  // peer not dialed yet, also knock on its listener (transport/knock.h), so
  // one that aborted or is gone fails this rank as connect()'s wait would.
  bool connect_if_ready(int peer, Deadline deadline, bool knock = false);
  // Where this rank leaves its abort report, and finds a peer's, while some
  // pair is unconnected (transport/abort_record.h). Null: nowhere (a failure
  // to connect then says only that the peer aborted or is gone).
  void set_abort_record(std::shared_ptr<AbortRecord> record) { abort_record_ = std::move(record); }
  // Where this rank names its suspects when the Mesh first fails, if it has
  // any (transport/abort_record.h). Null: nowhere.
  // Any thread: a device may fail (and read it) while connect still sets it.
  void set_suspect_record(std::shared_ptr<SuspectRecord> record);
  // Whether every peer's Pairs exist (no connect() can have work to do).
  bool fully_connected() const { return unconnected_.load(std::memory_order_acquire) == 0; }

  bool connected(int peer) const;
  // The Pairs of a connected peer (InvalidArgument for one not connected yet).
  Pair& pair(int peer, int stream = 0);
  int streams(int peer) const;
  Device& device_of(int peer) const;
  std::string_view transport_of(int peer) const { return device_of(peer).name(); }
  LinkModel link_model(int peer) const { return device_of(peer).link_model(peer); }

  // Bumped whenever any Device buffers a message no receive was posted for
  // (Device::watch_arrivals) and when the Mesh fails: what a receive from
  // any peer sleeps on between its looks (Pair::post_recv_if_arrived).
  CompletionSignal& arrivals() const { return *arrivals_; }

  // Fan-out over every Device.
  bool progress();
  // Device::await_arrival, where one device serves every peer (false
  // otherwise: a sleep in one device's poll would miss the other's bytes).
  bool await_arrival(std::chrono::microseconds limit);
  void begin_polling();
  void end_polling();
  void begin_waiting();
  void end_waiting();
  // Synchronous on every Device (see Device::abort); the first reason wins.
  void abort(std::exception_ptr reason);
  // The first failure of any Device, or null.
  std::exception_ptr failure() const;
  // Whether failure() is not null, without a lock (checked before every call).
  bool failed() const;

  // The connected peers that do not answer a liveness probe within `grace`
  // (Pair::send_liveness_probe): stopped or stuck processes, or peers the
  // network no longer reaches (a link down or shaped to a trickle). A rank that
  // timed out asks before it reports, so its error (and the abort every
  // other rank adopts) names the rank that froze, not only the live
  // neighbour it happened to wait on. Returns as soon as every peer answered.
  std::vector<int> unresponsive_peers(std::chrono::milliseconds grace);

  // Where this rank is in each Context: the executor writes it, answers to
  // the peers' probes read it.
  PositionTable& positions() const { return *positions_; }
  struct PeerReport {
    bool answered = false;  // false: silent within the grace (stopped, stuck, cut off)
    Position position;      // where it is in the group asked about
  };
  // Asks each of `peers` (connected ones) where it is in `group`, waiting up
  // to `grace` for all answers; silent peers become suspects, as in
  // unresponsive_peers. One report per peer, in order.
  std::vector<PeerReport> ask_positions(const std::vector<int>& peers, uint64_t group,
                                        std::chrono::milliseconds grace);

  // `error`, or where it is a PeerLostError and the lost peer left an abort
  // report in the abort record, that report as this rank's error: a peer that
  // aborted closes the pairs it never took up (on demand) without a word.
  // Without an abort record (the full mesh) always `error`.
  std::exception_ptr explain_loss(std::exception_ptr error) const;

  // Knocks (transport/knock.h) on the listeners of `peers`, which must have
  // no connection yet: how a stalled rank asks after them. Silent and gone
  // ones become suspects, as silent peers of ask_positions do.
  std::vector<KnockAnswer> knock_unconnected(const std::vector<int>& peers);

  // Peers this rank has seen die or freeze: those a probe found silent and
  // the one a PeerLostError ending this Mesh named (its own or relayed). What shrink (chorus/
  // shrink.h) tells the other survivors, so they need not wait for them.
  std::vector<int> suspects() const;

  // Which ranks of the job move CUDA memory to every one of their peers
  // (each peer's transport accepts it), as every rank learnt at connect: a
  // collective on device memory runs on the device only where all its
  // ranks do, which every rank must decide alike (algorithms/execution/staging.h).
  void set_device_memory_ranks(std::vector<bool> ranks) { device_memory_ranks_ = std::move(ranks); }
  bool moves_device_memory(int rank) const {
    return static_cast<size_t>(rank) < device_memory_ranks_.size() && device_memory_ranks_[static_cast<size_t>(rank)];
  }
  // Which ranks also map every peer's device memory (Device::maps_peer_memory),
  // learnt alike: a collective maps its peers' buffers only where all its ranks do.
  void set_peer_mapping_ranks(std::vector<bool> ranks) { peer_mapping_ranks_ = std::move(ranks); }
  bool maps_peer_memory(int rank) const {
    return static_cast<size_t>(rank) < peer_mapping_ranks_.size() && peer_mapping_ranks_[static_cast<size_t>(rank)];
  }
  // Whether every rank uses one device whose processes take turns of it
  // (MemoryKindSupport::time_sliced_device), learnt alike at connect: the
  // algorithms' costs of device memory differ there.
  void set_one_time_sliced_device(bool one) { one_time_sliced_device_ = one; }
  bool one_time_sliced_device() const { return one_time_sliced_device_; }

 private:
  void on_device_failure(const Device* source, std::exception_ptr reason);
  // Records `reason` as the Mesh's failure unless it has one; the first
  // also goes to the abort record (post_abort_record), and the suspects
  // then known to the suspect record.
  void note_failure(const std::exception_ptr& reason);
  // Returns whether this was the Mesh's first failure.
  bool note_failure_locked(std::exception_ptr reason);
  void post_abort_record(std::exception_ptr reason);
  void add_suspect_locked(int peer);  // once each
  const Link& link_of(int peer) const;
  void check_peer_rank(int peer) const;
  // Connects `peer`'s missing streams; false when `slice` and the deadline
  // passed while waiting for the peer to dial. Other failures: fail_to_connect.
  bool build_streams(int peer, Deadline deadline, bool slice);
  // Throws (after aborting) if the listener of a peer we wait for says it aborted or is gone.
  void knock_on(int peer);
  [[noreturn]] void fail_to_connect(int peer, std::exception_ptr error);
  // `error` or, where the peer left an abort report in the abort record, that report as this rank's error.
  std::exception_ptr with_peer_report(int peer, std::exception_ptr error) const;

  int rank_;
  int size_;
  // Shared with the Devices, whose cores may outlive the Mesh.
  std::shared_ptr<CompletionSignal> arrivals_ = std::make_shared<CompletionSignal>();
  std::vector<std::unique_ptr<Device>> devices_;
  // By peer rank. A Link's device is set once, before any use; its streams
  // are written once under connecting_[peer] and published by ready_[peer]
  // (release), which readers load (acquire) before they touch them.
  std::vector<Link> links_;
  std::vector<std::vector<std::byte>> peer_addresses_;
  std::unique_ptr<std::atomic<bool>[]> ready_;
  std::unique_ptr<std::mutex[]> connecting_;
  std::atomic<int> unconnected_;
  std::shared_ptr<AbortRecord> abort_record_;
  std::shared_ptr<SuspectRecord> suspect_record_;  // under mutex_
  mutable std::mutex mutex_;
  std::exception_ptr failure_;
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> last_probe_{0};
  std::vector<int> suspects_;  // under mutex_
  std::shared_ptr<PositionTable> positions_;
  std::vector<bool> device_memory_ranks_;
  std::vector<bool> peer_mapping_ranks_;
  bool one_time_sliced_device_ = false;
};

}  // namespace chorus::transport
