// The Mesh: links by peer, and failure and progress over every Device.
#include "transport/mesh.h"

#include <thread>

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {

Mesh::Mesh(int rank, int size, std::vector<std::unique_ptr<Device>> devices, std::shared_ptr<PositionBoard> positions)
    : rank_(rank),
      size_(size),
      devices_(std::move(devices)),
      links_(static_cast<size_t>(size)),
      positions_(positions ? std::move(positions) : std::make_shared<PositionBoard>()) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw InvalidArgument(cat("rank ", rank_, " is out of range for a job of size ", size_));
  for (const auto& device : devices_) {
    const Device* source = device.get();
    device->set_failure_listener([this, source](std::exception_ptr reason) { on_device_failure(source, reason); });
  }
  // One may have failed before it had a listener to tell.
  for (const auto& device : devices_)
    if (auto failure = device->failure()) on_device_failure(device.get(), failure);
}

Mesh::~Mesh() {
  // A Device failing while the others are torn down (the last one's
  // shutdown) must not reach into a half-destroyed Mesh, nor turn the other
  // Devices' orderly goodbyes into aborts.
  for (const auto& device : devices_) device->set_failure_listener(nullptr);
  links_.clear();  // the Pairs, before their Devices
  devices_.clear();
}

void Mesh::set_link(int peer, Link link) {
  if (peer < 0 || peer >= size_ || peer == rank_ || !link.device || link.streams.empty())
    throw InvalidArgument(cat("rank ", rank_, ": no valid link to peer rank ", peer));
  links_[static_cast<size_t>(peer)] = std::move(link);
}

bool Mesh::connected(int peer) const {
  return peer >= 0 && peer < size_ && peer != rank_ && links_[static_cast<size_t>(peer)].device != nullptr;
}

const Mesh::Link& Mesh::link_of(int peer) const {
  if (!connected(peer))
    throw InvalidArgument(cat("rank ", rank_, ": no connection to rank ", peer, " in a job of ", size_, " ranks"));
  return links_[static_cast<size_t>(peer)];
}

Pair& Mesh::pair(int peer, int stream) {
  const Link& link = link_of(peer);
  if (stream < 0 || static_cast<size_t>(stream) >= link.streams.size())
    throw InvalidArgument(cat("rank ", rank_, ": no stream ", stream, " to rank ", peer, " (", link.streams.size(),
                              " streams)"));
  return *link.streams[static_cast<size_t>(stream)];
}

int Mesh::streams(int peer) const { return static_cast<int>(link_of(peer).streams.size()); }

Device& Mesh::device_of(int peer) const { return *link_of(peer).device; }

bool Mesh::progress() {
  bool consumed = false;
  for (const auto& device : devices_) consumed |= device->progress();
  return consumed;
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

void Mesh::note_failure_locked(std::exception_ptr reason) {
  if (!failure_) {
    failure_ = reason;
    try {
      std::rethrow_exception(reason);
    } catch (const PeerLostError& error) {  // evidence of death, not a consequence of it
      const int blamed = error.peer_rank();
      if (blamed >= 0 && blamed < size_ && blamed != rank_ &&
          std::find(suspects_.begin(), suspects_.end(), blamed) == suspects_.end())
        suspects_.push_back(blamed);
    } catch (...) {
    }
  }
  failed_.store(true, std::memory_order_release);
}

std::vector<int> Mesh::suspects() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return suspects_;
}

void Mesh::abort(std::exception_ptr reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    note_failure_locked(reason);
  }
  for (const auto& device : devices_) device->abort(reason);
}

bool Mesh::failed() const { return failed_.load(std::memory_order_acquire); }

std::exception_ptr Mesh::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void Mesh::on_device_failure(const Device* source, std::exception_ptr reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    note_failure_locked(reason);
  }
  // Asynchronously: this may be a transport's own progress thread, which must
  // not wait for another transport's thread.
  for (const auto& device : devices_)
    if (device.get() != source) device->abort_async(reason);
}

std::vector<int> Mesh::unresponsive_peers(std::chrono::milliseconds grace) {
  std::vector<int> everyone;
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_ && connected(peer)) everyone.push_back(peer);
  const std::vector<PeerReport> reports = ask_positions(everyone, /*group=*/0, grace);
  std::vector<int> silent;
  for (size_t i = 0; i < everyone.size(); ++i)
    if (!reports[i].answered) silent.push_back(everyone[i]);
  return silent;
}

std::vector<Mesh::PeerReport> Mesh::ask_positions(const std::vector<int>& peers, uint64_t group,
                                                  std::chrono::milliseconds grace) {
  const uint64_t probe = last_probe_.fetch_add(1, std::memory_order_relaxed) + 1;
  std::vector<PeerReport> reports(peers.size());
  std::vector<size_t> waiting;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] == rank_ || !connected(peers[i])) continue;
    pair(peers[i]).send_liveness_probe(probe, group);
    waiting.push_back(i);
  }
  const Deadline deadline = Deadline::after(grace);
  while (!waiting.empty()) {
    progress();  // answers may be ours to read while this thread polls
    std::erase_if(waiting, [&](size_t i) {
      Pair& asked = pair(peers[i]);
      if (!asked.liveness_answered(probe)) return false;
      reports[i].answered = true;
      // A later probe about another group may have overtaken ours: alive, position unknown.
      if (std::optional<uint64_t> code = asked.answered_position(probe, group)) reports[i].position = decode_position(*code);
      return true;
    });
    if (waiting.empty() || deadline.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i : waiting)
    if (std::find(suspects_.begin(), suspects_.end(), peers[i]) == suspects_.end()) suspects_.push_back(peers[i]);
  return reports;
}

}  // namespace chorus::transport
