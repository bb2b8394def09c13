// The Mesh: links by peer, connecting them, and progress over every
// Device; the failure domain and the suspects are in mesh_failure.cc.
#include "transport/mesh.h"

#include <thread>

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {
namespace {

// How long a round of looks for awaited dials sleeps on one of them.
constexpr std::chrono::milliseconds kSlice{20};

}  // namespace

Mesh::Mesh(int rank, int size, std::vector<std::unique_ptr<Device>> devices, std::shared_ptr<PositionTable> positions)
    : rank_(rank),
      size_(size),
      devices_(std::move(devices)),
      positions_(positions ? std::move(positions) : std::make_shared<PositionTable>()) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw InvalidArgument(cat("rank ", rank_, " is out of range for a job of size ", size_));
  links_.resize(static_cast<size_t>(size_));
  peer_addresses_.resize(static_cast<size_t>(size_));
  ready_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(size_));
  connecting_ = std::make_unique<std::mutex[]>(static_cast<size_t>(size_));
  unconnected_.store(size_ - 1);
  for (const auto& device : devices_) {
    const Device* source = device.get();
    device->set_failure_listener([this, source](std::exception_ptr reason) { on_device_failure(source, reason); });
    device->watch_arrivals(arrivals_);
  }
  // One may have failed before it had a listener to tell.
  for (const auto& device : devices_)
    if (auto failure = device->failure()) on_device_failure(device.get(), failure);
}

Mesh::~Mesh() {
  // A Device failing while the others are torn down (the last one's
  // shutdown) must not reach into a half-destroyed Mesh, nor turn the other
  // Devices' orderly goodbyes into aborts.
  for (const auto& device : devices_) {
    device->set_failure_listener(nullptr);
    device->watch_arrivals(nullptr);
  }
  links_.clear();  // the Pairs, before their Devices
  devices_.clear();
}

void Mesh::check_peer_rank(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw InvalidArgument(cat("rank ", rank_, ": rank ", peer, " is not a peer in a job of ", size_, " ranks"));
}

void Mesh::set_link(int peer, Link link) {
  check_peer_rank(peer);
  if (!link.device || link.streams.empty())
    throw InvalidArgument(cat("rank ", rank_, ": no valid link to peer rank ", peer));
  const auto index = static_cast<size_t>(peer);
  std::lock_guard<std::mutex> lock(connecting_[index]);
  if (ready_[index].load(std::memory_order_acquire))
    throw InvalidArgument(cat("rank ", rank_, ": already connected to peer rank ", peer));
  links_[index] = std::move(link);
  ready_[index].store(true, std::memory_order_release);
  unconnected_.fetch_sub(1, std::memory_order_acq_rel);
}

void Mesh::set_route(int peer, Device* device, std::vector<std::byte> peer_address) {
  check_peer_rank(peer);
  if (!device) throw InvalidArgument(cat("rank ", rank_, ": no transport serves peer rank ", peer));
  const auto index = static_cast<size_t>(peer);
  std::lock_guard<std::mutex> lock(connecting_[index]);
  if (ready_[index].load(std::memory_order_acquire) || links_[index].device)
    throw InvalidArgument(cat("rank ", rank_, ": peer rank ", peer, " already has a route"));
  links_[index].device = device;
  peer_addresses_[index] = std::move(peer_address);
}

void Mesh::connect(int peer, Deadline deadline) {
  if (connected(peer)) return;  // every message after a pair's first: no allocation
  connect(std::vector<int>{peer}, deadline);
}

void Mesh::connect(std::vector<int> peers, Deadline deadline) {
  if (fully_connected()) return;
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  // Dials first: they never wait for the peer's application, only for its
  // listener, so no rank's dial waits on another rank's wait.
  std::vector<int> waits;
  for (int peer : peers) {
    if (peer == rank_ || connected(peer)) continue;
    check_peer_rank(peer);
    if (device_of(peer).dials(peer))
      build_streams(peer, deadline, false);
    else
      waits.push_back(peer);
  }
  if (waits.empty()) return;
  // Then the waits, all at once: each round looks at every peer still
  // awaited and sleeps on one of them for a slice, so whichever peer dials
  // first is taken first and its connection read (an abort it relays
  // heard) at once, not after the waits before it. A peer that aborted or
  // died before dialing is found by knocking on its listener.
  const auto started = Clock::now();
  std::vector<KnockSchedule> knocks(waits.size());
  while (!waits.empty()) {
    for (size_t i = 0; i < waits.size();) {
      const int peer = waits[i];
      const auto look = i == 0 ? std::min(deadline.at(), Clock::now() + kSlice) : Clock::now();
      if (build_streams(peer, Deadline(look), true)) {
        waits.erase(waits.begin() + static_cast<std::ptrdiff_t>(i));
        knocks.erase(knocks.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (knocks[i].due(Clock::now() - started)) knock_on(peer);
      ++i;
    }
    if (!waits.empty() && deadline.expired()) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
      std::string listed;
      for (int peer : waits) listed += cat(listed.empty() ? "" : ", ", peer);
      fail_to_connect(waits.front(),
                      std::make_exception_ptr(TimeoutError(cat(
                          "rank ", rank_, ": timed out after ", waited, " ms waiting for peer rank",
                          waits.size() > 1 ? "s " : " ", listed, " to connect to this rank (the higher rank dials "
                          "when it first needs the pair: has it started, and reached a call with this rank?)"))));
    }
  }
}

bool Mesh::connect_if_ready(int peer, Deadline deadline, bool knock) {
  if (connected(peer)) return true;
  check_peer_rank(peer);
  if (device_of(peer).dials(peer)) return build_streams(peer, deadline, false);
  // A deadline already passed: the device takes a dial that came, waits for none.
  if (build_streams(peer, Deadline(Clock::now()), true)) return true;
  if (knock) knock_on(peer);
  return false;
}

bool Mesh::build_streams(int peer, Deadline deadline, bool slice) {
  const auto index = static_cast<size_t>(peer);
  std::lock_guard<std::mutex> lock(connecting_[index]);
  if (ready_[index].load(std::memory_order_acquire)) return true;
  Link& link = links_[index];
  try {
    if (failed()) std::rethrow_exception(failure());
    const auto started = Clock::now();
    while (link.streams.size() < static_cast<size_t>(link.device->streams()))
      link.streams.push_back(
          link.device->connect(peer, peer_addresses_[index], deadline, static_cast<int>(link.streams.size())));
    CHORUS_LOG(debug, rank_, "connected to peer rank ", peer, " over ", link.device->name(), " in ",
               std::chrono::duration<double, std::milli>(Clock::now() - started).count(), " ms");
  } catch (const TimeoutError&) {
    if (!slice || failed()) fail_to_connect(peer, std::current_exception());
    return false;  // the caller waits on
  } catch (...) {
    fail_to_connect(peer, std::current_exception());
  }
  ready_[index].store(true, std::memory_order_release);
  unconnected_.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

void Mesh::knock_on(int peer) {
  const auto index = static_cast<size_t>(peer);
  const KnockAnswer answer = links_[index].device->knock(peer, peer_addresses_[index]);
  if (answer == KnockAnswer::refused)
    fail_to_connect(peer, std::make_exception_ptr(PeerLostError(
                              cat("rank ", rank_, ": peer rank ", peer, " is gone: its ", links_[index].device->name(),
                                  " listener refuses connections while this rank waits for it to connect (the "
                                  "process exited or closed its Context)"),
                              peer)));
  if (answer == KnockAnswer::closed)
    fail_to_connect(peer, std::make_exception_ptr(Aborted(cat(
                              "rank ", rank_, ": peer rank ", peer, " aborted before connecting to this rank: its ",
                              links_[index].device->name(), " listener closes every connection (its own error says "
                              "why)"))));
}

bool Mesh::connected(int peer) const {
  return peer >= 0 && peer < size_ && peer != rank_ && ready_[static_cast<size_t>(peer)].load(std::memory_order_acquire);
}

const Mesh::Link& Mesh::link_of(int peer) const {
  if (!connected(peer)) {
    check_peer_rank(peer);
    throw InvalidArgument(cat("rank ", rank_, ": no connection to rank ", peer, " yet (Mesh::connect makes it)"));
  }
  return links_[static_cast<size_t>(peer)];
}

Pair& Mesh::pair(int peer, int stream) {
  const Link& link = link_of(peer);
  if (stream < 0 || static_cast<size_t>(stream) >= link.streams.size())
    throw InvalidArgument(cat("rank ", rank_, ": no stream ", stream, " to rank ", peer, " (", link.streams.size(),
                              " streams)"));
  return *link.streams[static_cast<size_t>(stream)];
}

int Mesh::streams(int peer) const {
  if (connected(peer)) return static_cast<int>(links_[static_cast<size_t>(peer)].streams.size());
  return device_of(peer).streams();
}

Device& Mesh::device_of(int peer) const {
  check_peer_rank(peer);
  Device* device = links_[static_cast<size_t>(peer)].device;
  if (!device) throw InvalidArgument(cat("rank ", rank_, ": no transport serves peer rank ", peer));
  return *device;
}

bool Mesh::progress() {
  bool consumed = false;
  for (const auto& device : devices_) consumed |= device->progress();
  return consumed;
}

bool Mesh::await_arrival(std::chrono::microseconds limit) {
  return devices_.size() == 1 && devices_.front()->await_arrival(limit);
}

void Mesh::begin_polling() {
  for (const auto& device : devices_) device->begin_polling();
}

void Mesh::end_polling() {
  for (const auto& device : devices_) device->end_polling();
}

void Mesh::begin_waiting() {
  for (const auto& device : devices_) device->begin_waiting();
}

void Mesh::end_waiting() {
  for (const auto& device : devices_) device->end_waiting();
}

}  // namespace chorus::transport
