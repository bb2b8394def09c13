// Test helpers: N TCP devices in one process connected as a full mesh, byte
// patterns that make every misplaced byte visible, and waiting helpers.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/deadline.h"
#include "base/error.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"

namespace chorus::transport::tcp::testing {

using namespace std::chrono_literals;

struct Mesh {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::vector<std::unique_ptr<Pair>>> pairs;  // [rank][peer]
  Pair& pair(int rank, int peer) { return *pairs[rank][peer]; }
  // Destroys one rank's pairs and device, as its Context would.
  void destroy(int rank) {
    pairs[rank].clear();
    devices[rank].reset();
  }
};

inline std::vector<std::unique_ptr<Device>> make_devices(int size, TcpDeviceOptions options = {}) {
  if (options.hostname.empty() && options.interface.empty()) options.hostname = "127.0.0.1";
  std::vector<std::unique_ptr<Device>> devices;
  for (int rank = 0; rank < size; ++rank) {
    options.rank = rank;
    options.size = size;
    devices.push_back(create_device(options));
  }
  return devices;
}

// Every rank connects to every other from its own thread, as real ranks would.
inline void connect_mesh(Mesh& mesh, std::chrono::milliseconds timeout = 10s) {
  int size = static_cast<int>(mesh.devices.size());
  std::vector<std::vector<std::byte>> addresses;
  for (auto& device : mesh.devices) addresses.push_back(device->address());
  mesh.pairs.clear();
  mesh.pairs.resize(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  auto deadline = Deadline::after(timeout);
  for (int rank = 0; rank < size; ++rank) {
    mesh.pairs[rank].resize(size);
    threads.emplace_back([&, rank] {
      try {
        for (int peer = 0; peer < size; ++peer)
          if (peer != rank) mesh.pairs[rank][peer] = mesh.devices[rank]->connect(peer, addresses[peer], deadline);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

inline Mesh make_mesh(int size, TcpDeviceOptions options = {}) {
  Mesh mesh;
  mesh.devices = make_devices(size, std::move(options));
  connect_mesh(mesh);
  return mesh;
}

// A byte pattern that differs per message (seed) and per position, so a
// shifted, truncated or swapped payload never passes for the right one.
inline std::byte pattern_byte(size_t seed, size_t index) {
  uint64_t x = (index + 1) * 0x9E3779B97F4A7C15ull ^ (seed * 0xC2B2AE3D27D4EB4Full);
  return static_cast<std::byte>((x >> 29) ^ (x >> 7));
}
inline std::vector<std::byte> pattern(size_t seed, size_t bytes) {
  std::vector<std::byte> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = pattern_byte(seed, i);
  return data;
}
// Index of the first wrong byte, or bytes.size() when all match.
inline size_t first_mismatch(const std::vector<std::byte>& data, size_t seed) {
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] != pattern_byte(seed, i)) return i;
  return data.size();
}

inline void wait_ok(Request& request, std::chrono::milliseconds timeout = 20s) {
  request.wait(Deadline::after(timeout), "test: timed out waiting for a request");
}

// Waits for a request that must fail with E; returns the error text.
template <class E>
std::string wait_error(Request& request, std::chrono::milliseconds timeout = 10s) {
  try {
    request.wait(Deadline::after(timeout), "test: timed out waiting for a failure");
  } catch (const E& error) {
    return error.what();
  }
  FAIL("the request completed but was expected to fail");
  return "";
}

// Aborts rank 1 while 256 MiB from rank 0 is arriving, then checks that not a
// byte lands after abort() returned and that the sender fails too.
// `companion`, if given, runs on its own thread for the whole attempt (e.g. a
// caller polling rank 1's device) until `stop` is set. On a loaded machine
// the 5 ms nap can outlast the whole transfer; such an attempt proves
// nothing, so it is repeated rather than counted.
inline void check_no_byte_lands_after_abort(
    const std::function<void(Mesh&, const std::atomic<bool>& stop)>& companion = {}) {
  const size_t size = size_t{256} << 20;
  std::vector<std::byte> outgoing(size, std::byte{0xab}), incoming(size);
  auto landed = [&] { return static_cast<size_t>(std::count(incoming.begin(), incoming.end(), std::byte{0xab})); };
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::fill(incoming.begin(), incoming.end(), std::byte{0});
    Mesh mesh = make_mesh(2);
    CompletionSignal signal;
    Request send, recv;
    send.attach(&signal);
    recv.attach(&signal);
    mesh.pair(1, 0).post_recv(recv, {1, 1}, incoming);
    mesh.pair(0, 1).post_send(send, {1, 1}, std::span<const std::byte>(outgoing));
    std::atomic<bool> stop{false};
    std::thread helper;
    if (companion) helper = std::thread([&] { companion(mesh, stop); });
    std::this_thread::sleep_for(5ms);
    mesh.devices[1]->abort(std::make_exception_ptr(Aborted("rank 1: mid-transfer abort")));
    const bool finished_first = recv.state() == Request::State::done;
    const bool failed = recv.state() == Request::State::failed;
    const size_t landed_at_abort = landed();
    std::this_thread::sleep_for(100ms);
    stop.store(true);
    if (helper.joinable()) helper.join();
    if (finished_first) continue;
    REQUIRE(failed);
    REQUIRE(landed() == landed_at_abort);
    REQUIRE_THROWS_AS(wait_ok(send, 5s), Error);
    return;
  }
  FAIL("the 256 MiB transfer finished before the abort in every attempt");
}

}  // namespace chorus::transport::tcp::testing
