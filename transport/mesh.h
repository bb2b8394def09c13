// A Mesh is one rank's connections to every other rank of a job: every
// Device the rank uses (one per transport) and, per peer, the Pairs of the
// one transport that serves it (several Pairs where that transport keeps
// several streams per peer). It is the failure domain: the first failure of
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

#include "base/link_model.h"
#include "base/memory.h"
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
  // connects, so that failure spreading is in place from the start. Links
  // are added with set_link as they connect.
  // `positions` is the board the Devices' probe answers read (DeviceOptions::
  // positions); null: the Mesh makes one of its own.
  Mesh(int rank, int size, std::vector<std::unique_ptr<Device>> devices,
       std::shared_ptr<PositionBoard> positions = nullptr);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  void set_link(int peer, Link link);

  bool connected(int peer) const;
  Pair& pair(int peer, int stream = 0);
  int streams(int peer) const;
  Device& device_of(int peer) const;
  std::string_view transport_of(int peer) const { return device_of(peer).name(); }
  LinkModel link_model(int peer) const { return device_of(peer).link_model(peer); }

  // Fan-out over every Device.
  bool progress();
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
  PositionBoard& positions() const { return *positions_; }
  struct PeerReport {
    bool answered = false;  // false: silent within the grace (stopped, stuck, cut off)
    Position position;      // where it is in the group asked about
  };
  // Asks each of `peers` (connected ones) where it is in `group`, waiting up
  // to `grace` for all answers; silent peers become suspects, as in
  // unresponsive_peers. One report per peer, in order.
  std::vector<PeerReport> ask_positions(const std::vector<int>& peers, uint64_t group,
                                        std::chrono::milliseconds grace);

  // Peers this rank has seen die or freeze: those a probe found silent and
  // the one a PeerLostError ending this Mesh named (its own or relayed). What shrink (chorus/
  // shrink.h) tells the other survivors, so they need not wait for them.
  std::vector<int> suspects() const;

  // Which ranks of the job move CUDA memory to every one of their peers
  // (each peer's transport accepts it), as every rank learnt at connect: a
  // collective on device memory runs on the device only where all its
  // ranks do, which every rank must decide alike (algorithms/staging.h).
  void set_device_memory_ranks(std::vector<bool> ranks) { device_memory_ranks_ = std::move(ranks); }
  bool moves_device_memory(int rank) const {
    return static_cast<size_t>(rank) < device_memory_ranks_.size() && device_memory_ranks_[static_cast<size_t>(rank)];
  }

 private:
  void on_device_failure(const Device* source, std::exception_ptr reason);
  void note_failure_locked(std::exception_ptr reason);
  const Link& link_of(int peer) const;

  int rank_;
  int size_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<Link> links_;  // by peer rank
  mutable std::mutex mutex_;
  std::exception_ptr failure_;
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> last_probe_{0};
  std::vector<int> suspects_;  // under mutex_
  std::shared_ptr<PositionBoard> positions_;
  std::vector<bool> device_memory_ranks_;
};

}  // namespace chorus::transport
