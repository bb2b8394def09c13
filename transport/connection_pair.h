// The Pair handle every transport hands out for one of its connections (tcp,
// shm, ibverbs): it forwards to the connection and holds the transport's
// engine, so the connection's memory stays valid whatever is destroyed
// first (posts then fail with the device's failure). Written once here.
//
// What a Connection provides: peer_rank(), post_send(request, tag, data),
// post_recv(request, tag, data, only_if_arrived), send_probe(probe, group),
// probe_answered(probe), answered_position(probe, group), find_unclaimed(group,
// wanted); and where the
// transport has one-sided access (ibverbs), post_one_sided(request, put,
// local, bytes, remote). Resolved at compile time: no call costs more than
// the Pair's own virtual one.
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "transport/transport.h"

namespace chorus::transport {

template <class Connection>
class ConnectionPair final : public Pair {
 public:
  ConnectionPair(std::shared_ptr<void> keep_alive, Connection& connection)
      : keep_alive_(std::move(keep_alive)), connection_(connection) {}

  int peer_rank() const override { return connection_.peer_rank(); }
  using Pair::post_recv;
  using Pair::post_send;
  // Callers post only memory the Device accepts (host): decorators
  // (host staging, cuda_ipc) move the rest before it gets here.
  void post_send(Request& request, Tag tag, std::span<const std::byte> data,
                 [[maybe_unused]] Memory memory) override {
    assert(memory.kind == MemoryKind::host);
    connection_.post_send(request, tag, data);
  }
  void post_recv(Request& request, Tag tag, std::span<std::byte> data, [[maybe_unused]] Memory memory) override {
    assert(memory.kind == MemoryKind::host);
    connection_.post_recv(request, tag, data, /*only_if_arrived=*/false);
  }
  bool post_recv_if_arrived(Request& request, Tag tag, std::span<std::byte> data,
                            [[maybe_unused]] Memory memory) override {
    assert(memory.kind == MemoryKind::host);
    return connection_.post_recv(request, tag, data, /*only_if_arrived=*/true);
  }
  bool peer_closed() const override {
    if constexpr (requires(const Connection& connection) { connection.peer_closed(); })
      return connection_.peer_closed();
    else
      return false;
  }
  std::optional<Tag> find_unclaimed(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const override {
    return connection_.find_unclaimed(group, oldest, wanted);
  }
  bool one_sided() const override { return kOneSided; }
  void post_put(Request& request, std::span<const std::byte> data, RemoteMemory target) override {
    if constexpr (kOneSided)
      connection_.post_one_sided(request, true, const_cast<std::byte*>(data.data()), data.size(), target);
    else
      Pair::post_put(request, data, target);
  }
  void post_get(Request& request, std::span<std::byte> data, RemoteMemory source) override {
    if constexpr (kOneSided)
      connection_.post_one_sided(request, false, data.data(), data.size(), source);
    else
      Pair::post_get(request, data, source);
  }
  void send_liveness_probe(uint64_t probe, uint64_t group) override { connection_.send_probe(probe, group); }
  bool liveness_answered(uint64_t probe) const override { return connection_.probe_answered(probe); }
  std::optional<uint64_t> answered_position(uint64_t probe, uint64_t group) const override {
    return connection_.answered_position(probe, group);
  }

 private:
  static constexpr bool kOneSided =
      requires(Connection& connection, Request& request, std::byte* local, RemoteMemory remote) {
        connection.post_one_sided(request, true, local, size_t{0}, remote);
      };

  std::shared_ptr<void> keep_alive_;
  Connection& connection_;
};

}  // namespace chorus::transport
