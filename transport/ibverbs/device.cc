// The verbs transport's Pair (the shared ConnectionPair, posting through the
// engine) and Device (the shared EngineDevice).
#include <memory>

#include "base/error.h"
#include "base/log.h"
#include "transport/ibverbs/engine.h"
#include "transport/ibverbs/ibverbs.h"
#include "transport/connection_pair.h"
#include "transport/engine_device.h"

namespace chorus::transport::ibverbs {
// A connection's posts go through its engine, whose lock guards every
// connection (engine.h). The owner is always the Engine (it alone makes
// connections), so the cast costs nothing and no virtual call is added.
namespace {
Engine& engine_of(ConnectionOwner& owner) { return static_cast<Engine&>(owner); }
}  // namespace

void Connection::post_send(Request& request, Tag tag, std::span<const std::byte> data) {
  engine_of(owner_).post_send(*this, request, tag, data);
}
bool Connection::post_recv(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived) {
  return engine_of(owner_).post_recv(*this, request, tag, data, only_if_arrived);
}
std::optional<Tag> Connection::find_unclaimed(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const {
  return engine_of(owner_).find_unclaimed(*this, group, oldest, wanted);
}
void Connection::post_one_sided(Request& request, bool put, std::byte* local, size_t bytes, RemoteMemory remote) {
  engine_of(owner_).post_one_sided(*this, request, put, local, bytes, remote);
}
void Connection::send_probe(uint64_t probe, uint64_t group) { engine_of(owner_).send_probe(*this, probe, group); }

std::unique_ptr<Pair> Engine::make_pair_locked(Connection& connection) {
  return std::make_unique<ConnectionPair<Connection>>(shared_from_this(), connection);
}

std::unique_ptr<Device> create_device(const IbverbsDeviceOptions& options) {
  return start_engine_device<Engine>("ibverbs", options);
}

bool can_connect(std::span<const std::byte> a, std::span<const std::byte> b) { return !a.empty() && !b.empty(); }

}  // namespace chorus::transport::ibverbs
