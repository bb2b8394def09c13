// The Device every transport hands to the Mesh: a handle on the transport's
// Engine, the object that really is the device (its listener, progress
// thread, connections and failure). The Engine is shared with every Pair
// handle, so a Pair that outlives the Device still points at valid memory
// and its posts fail with the device's failure; this handle only forwards,
// and when it is dropped it stops the engine's failure callback (the engine
// may live on in Pairs) and shuts the engine down. Written once here, so a
// transport writes only what is its own.
//
// What an Engine provides:
//   rank(), address(), check_peer(peer, address),
//   connect(peer, address, deadline, stream), link_model(peer),
//   failure(), progress(), begin_polling(), end_polling(), arrivals(),
//   set_failure_callback(callback), start(), shutdown(),
//   abort(reason, LogLevel, wait) or abort(reason, wait);
// and where the transport has them (the Device's defaults otherwise):
//   streams(), knock(peer, address), relay_instead(reason),
//   begin_waiting(), end_waiting(), register_memory(data),
//   create_shared_region(bytes), open_shared_region(peer, description, bytes).
#pragma once

#include <exception>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "transport/transport.h"

namespace chorus::transport {

template <class Engine>
class EngineDevice final : public Device {
 public:
  // `name`: a literal, as CHORUS_TRANSPORT spells the transport.
  EngineDevice(std::string_view name, std::shared_ptr<Engine> engine) : name_(name), engine_(std::move(engine)) {
    engine_->set_failure_callback([this](std::exception_ptr reason) { notify_failure(reason); });
  }
  ~EngineDevice() override {
    engine_->set_failure_callback(nullptr);
    engine_->shutdown();
  }
  EngineDevice(const EngineDevice&) = delete;
  EngineDevice& operator=(const EngineDevice&) = delete;

  std::string_view name() const override { return name_; }
  int rank() const override { return engine_->rank(); }
  std::vector<std::byte> address() const override { return engine_->address(); }
  void check_peer(int peer_rank, std::span<const std::byte> peer_address) const override {
    engine_->check_peer(peer_rank, peer_address);
  }
  int streams() const override {
    if constexpr (requires(const Engine& engine) { engine.streams(); })
      return engine_->streams();
    else
      return Device::streams();
  }
  std::unique_ptr<Pair> connect(int peer_rank, std::span<const std::byte> peer_address, Deadline deadline,
                                int stream = 0) override {
    return engine_->connect(peer_rank, peer_address, deadline, stream);
  }
  KnockAnswer knock(int peer_rank, std::span<const std::byte> peer_address) const override {
    if constexpr (requires(const Engine& engine) { engine.knock(peer_rank, peer_address); })
      return engine_->knock(peer_rank, peer_address);
    else
      return Device::knock(peer_rank, peer_address);
  }
  LinkModel link_model(int peer_rank) const override { return engine_->link_model(peer_rank); }
  bool listens_beyond_host() const override {
    if constexpr (requires(const Engine& engine) { engine.listens_beyond_host(); })
      return engine_->listens_beyond_host();
    else
      return Device::listens_beyond_host();
  }
  void watch_arrivals(std::shared_ptr<CompletionSignal> signal) override {
    engine_->arrivals().watch(std::move(signal));
  }
  std::shared_ptr<Registration> register_memory(std::span<const std::byte> data, Memory memory) override {
    if constexpr (requires(Engine& engine) { engine.register_memory(data); }) {
      if (!accepts(memory))
        throw InvalidArgument(cat("rank ", rank(), ": the ", name_, " transport cannot move ", to_string(memory),
                                  " memory"));
      return engine_->register_memory(data);
    } else {
      return Device::register_memory(data, memory);
    }
  }

  std::unique_ptr<SharedRegion> create_shared_region(size_t bytes) override {
    if constexpr (requires(Engine& engine) { engine.create_shared_region(bytes); })
      return engine_->create_shared_region(bytes);
    else
      return Device::create_shared_region(bytes);
  }
  std::unique_ptr<SharedRegion> open_shared_region(int peer_rank, std::span<const std::byte> description,
                                                   size_t bytes) override {
    if constexpr (requires(Engine& engine) { engine.open_shared_region(peer_rank, description, bytes); })
      return engine_->open_shared_region(peer_rank, description, bytes);
    else
      return Device::open_shared_region(peer_rank, description, bytes);
  }

  void abort(std::exception_ptr reason) override { abort_engine(std::move(reason), true); }
  void abort_async(std::exception_ptr reason) override { abort_engine(std::move(reason), false); }
  std::exception_ptr failure() const override { return engine_->failure(); }
  void relay_instead(std::exception_ptr reason) override {
    if constexpr (requires(Engine& engine) { engine.relay_instead(reason); }) engine_->relay_instead(std::move(reason));
  }

  bool progress() override { return engine_->progress(); }
  bool await_arrival(std::chrono::microseconds limit) override {
    if constexpr (requires(Engine& engine) { engine.await_arrival(limit); })
      return engine_->await_arrival(limit);
    else
      return Device::await_arrival(limit);
  }
  void begin_polling() override { engine_->begin_polling(); }
  void end_polling() override { engine_->end_polling(); }
  void begin_waiting() override {
    if constexpr (requires(Engine& engine) { engine.begin_waiting(); }) engine_->begin_waiting();
  }
  void end_waiting() override {
    if constexpr (requires(Engine& engine) { engine.end_waiting(); }) engine_->end_waiting();
  }

 private:
  // An abort the user or the Mesh asked for is news, not an alarm: info.
  void abort_engine(std::exception_ptr reason, bool wait) {
    if constexpr (requires(Engine& engine) { engine.abort(reason, LogLevel::info, wait); })
      engine_->abort(std::move(reason), LogLevel::info, wait);
    else
      engine_->abort(std::move(reason), wait);
  }

  std::string_view name_;
  std::shared_ptr<Engine> engine_;
};

// Starts an Engine built from `options` and hands out its Device.
template <class Engine, class Options>
std::unique_ptr<Device> start_engine_device(std::string_view name, const Options& options) {
  auto engine = std::make_shared<Engine>(options);
  engine->start();
  return std::make_unique<EngineDevice<Engine>>(name, std::move(engine));
}

}  // namespace chorus::transport
