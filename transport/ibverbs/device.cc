// The Pair handle of the verbs transport, and its factory (its Device is
// the shared EngineDevice).
#include <cassert>
#include <memory>

#include "base/error.h"
#include "base/log.h"
#include "transport/ibverbs/engine.h"
#include "transport/ibverbs/ibverbs.h"
#include "transport/engine_device.h"

namespace chorus::transport::ibverbs {
namespace {

// Holding the engine keeps the connection's memory valid even if the Device
// is destroyed first; posts then fail with the device's failure.
class VerbsPair final : public Pair {
 public:
  VerbsPair(std::shared_ptr<Engine> engine, Connection& connection)
      : engine_(std::move(engine)), connection_(connection) {}
  int peer_rank() const override { return connection_.peer_rank(); }
  using Pair::post_recv;
  using Pair::post_send;
  void post_send(Request& request, Tag tag, std::span<const std::byte> data, [[maybe_unused]] Memory memory) override {
    // Callers post only memory the Device accepts (host); decorators move the rest.
  assert(memory.kind == MemoryKind::host);
    engine_->post_send(connection_, request, tag, data);
  }
  void post_recv(Request& request, Tag tag, std::span<std::byte> data, [[maybe_unused]] Memory memory) override {
    assert(memory.kind == MemoryKind::host);
    engine_->post_recv(connection_, request, tag, data);
  }
  bool post_recv_if_arrived(Request& request, Tag tag, std::span<std::byte> data,
                            [[maybe_unused]] Memory memory) override {
    assert(memory.kind == MemoryKind::host);
    return engine_->post_recv_if_arrived(connection_, request, tag, data);
  }
  bool one_sided() const override { return true; }
  void post_put(Request& request, std::span<const std::byte> data, RemoteMemory target) override {
    engine_->post_one_sided(connection_, request, true, const_cast<std::byte*>(data.data()), data.size(), target);
  }
  void post_get(Request& request, std::span<std::byte> data, RemoteMemory source) override {
    engine_->post_one_sided(connection_, request, false, data.data(), data.size(), source);
  }
  void send_liveness_probe(uint64_t probe, uint64_t group) override { engine_->send_probe(connection_, probe, group); }
  bool liveness_answered(uint64_t probe) const override { return connection_.probe_answered(probe); }
  std::optional<uint64_t> answered_position(uint64_t probe, uint64_t group) const override {
    return connection_.answered_position(probe, group);
  }

 private:
  std::shared_ptr<Engine> engine_;
  Connection& connection_;
};

}  // namespace

std::unique_ptr<Pair> Engine::make_pair_locked(Connection& connection) {
  return std::make_unique<VerbsPair>(shared_from_this(), connection);
}

std::unique_ptr<Device> create_device(const IbverbsDeviceOptions& options) {
  return start_engine_device<Engine>("ibverbs", options);
}

bool can_connect(std::span<const std::byte> a, std::span<const std::byte> b) { return !a.empty() && !b.empty(); }

}  // namespace chorus::transport::ibverbs
