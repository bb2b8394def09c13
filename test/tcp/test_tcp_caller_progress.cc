// TCP transport, caller-side progress (Device::progress): waiters that read
// their own sockets while the progress thread reads them too must land every
// byte exactly once, and abort and peer death must behave as without it.
#include <algorithm>
#include <atomic>
#include <thread>

#include "base/error.h"
#include "test/tcp/mesh.h"

namespace chorus::transport::tcp::testing {
namespace {

using Catch::Matchers::Contains;

// Waits like the executor does: polls the device on this thread until the request finishes.
void poll_until_finished(Device& device, Request& request, std::chrono::milliseconds timeout = 20s) {
  auto give_up = Clock::now() + timeout;
  while (!request.finished()) {
    device.progress();
    if (Clock::now() > give_up) FAIL("timed out polling for a request");
  }
}

TEST_CASE("tcp progress: polling callers and the progress thread share the sockets without losing a byte",
          "[tcp]") {
  Mesh mesh = make_mesh(2);
  // Sizes from empty to larger than the staging buffer, so payloads land both
  // through staging and in place, split across the two reading threads.
  const std::vector<size_t> sizes = {0, 1, 8, 4096, 65536, 300000, 1 << 20};
  const int rounds = 60;
  std::atomic<int> bad{0};
  auto rank_loop = [&](int rank) {
    int peer = 1 - rank;
    CompletionSignal signal;
    for (int round = 0; round < rounds; ++round) {
      size_t size = sizes[static_cast<size_t>(round) % sizes.size()];
      size_t seed = static_cast<size_t>(round * 2 + rank);
      auto outgoing = pattern(seed, size);
      std::vector<std::byte> incoming(size, std::byte{0x5a});
      Request send, recv;
      send.attach(&signal);
      recv.attach(&signal);
      // Odd rounds post the receive late, so some messages wait as unexpected.
      if (round % 2 == 0) mesh.pair(rank, peer).post_recv(recv, {static_cast<uint64_t>(round), 9}, incoming);
      mesh.pair(rank, peer).post_send(send, {static_cast<uint64_t>(round), 9}, outgoing);
      if (round % 2 == 1) mesh.pair(rank, peer).post_recv(recv, {static_cast<uint64_t>(round), 9}, incoming);
      poll_until_finished(*mesh.devices[rank], recv);
      wait_ok(send);
      size_t peer_seed = static_cast<size_t>(round * 2 + peer);
      if (recv.state() != Request::State::done || first_mismatch(incoming, peer_seed) != size) ++bad;
    }
  };
  std::thread other(rank_loop, 1);
  rank_loop(0);
  other.join();
  REQUIRE(bad.load() == 0);
  REQUIRE_FALSE(mesh.devices[0]->failure());
  REQUIRE_FALSE(mesh.devices[1]->failure());
}

TEST_CASE("tcp progress: inside a polling scope the caller is the only reader, and hands reading back after",
          "[tcp]") {
  Mesh mesh = make_mesh(2);
  CompletionSignal signal;
  auto outgoing = pattern(7, 100000);
  std::vector<std::byte> incoming(outgoing.size());
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  {
    PollingScope polling(*mesh.devices[1]);
    mesh.pair(1, 0).post_recv(recv, {1, 1}, incoming);
    mesh.pair(0, 1).post_send(send, {1, 1}, std::span<const std::byte>(outgoing));
    wait_ok(send);
    // The progress thread leaves a parked socket alone: nothing lands until
    // this thread reads (100 KB fit in loopback's socket buffers).
    std::this_thread::sleep_for(50ms);
    CHECK(recv.state() == Request::State::pending);
    poll_until_finished(*mesh.devices[1], recv);
    REQUIRE(recv.state() == Request::State::done);
    CHECK(first_mismatch(incoming, 7) == incoming.size());
  }
  // Out of the scope, the progress thread reads again with nobody polling.
  Request late;
  late.attach(&signal);
  std::vector<std::byte> late_in(outgoing.size());
  mesh.pair(1, 0).post_recv(late, {2, 2}, late_in);
  Request late_send;
  late_send.attach(&signal);
  mesh.pair(0, 1).post_send(late_send, {2, 2}, std::span<const std::byte>(outgoing));
  wait_ok(late);
  CHECK(first_mismatch(late_in, 7) == late_in.size());
}

TEST_CASE("tcp progress: a polling caller hears an abort from a peer it expects nothing from", "[tcp]") {
  // A rank waiting on rank 2 must still learn at once that rank 0 aborted
  // (say, on seeing a third rank die): rank 0's socket is parked, so nobody
  // but this caller reads it.
  Mesh mesh = make_mesh(3);
  CompletionSignal signal;
  std::vector<std::byte> incoming(10);
  Request recv;
  recv.attach(&signal);
  PollingScope polling(*mesh.devices[1]);
  // Rank 2 "polls" too but never reads, so it cannot relay rank 0's abort.
  PollingScope deaf(*mesh.devices[2]);
  mesh.pair(1, 2).post_recv(recv, {3, 3}, incoming);  // rank 2 never sends
  std::thread aborter([&] {
    std::this_thread::sleep_for(20ms);
    mesh.devices[0]->abort(std::make_exception_ptr(IoError("rank 0: lost peer rank 3", 3)));
  });
  poll_until_finished(*mesh.devices[1], recv, 5s);
  aborter.join();
  REQUIRE(recv.state() == Request::State::failed);
  REQUIRE_THROWS_WITH(std::rethrow_exception(recv.error()), Contains("lost peer rank 3"));
}

TEST_CASE("tcp progress: after abort returns, a polling caller lands no byte", "[tcp]") {
  check_no_byte_lands_after_abort([](Mesh& mesh, const std::atomic<bool>& stop) {
    while (!stop.load()) mesh.devices[1]->progress();
  });
}

TEST_CASE("tcp progress: a polling caller sees its peer close and fails with the peer's rank", "[tcp]") {
  Mesh mesh = make_mesh(2);
  CompletionSignal signal;
  std::vector<std::byte> incoming(10);
  Request recv;
  recv.attach(&signal);
  mesh.pair(1, 0).post_recv(recv, {3, 3}, incoming);
  std::thread closer([&] {
    std::this_thread::sleep_for(20ms);
    mesh.destroy(0);
  });
  poll_until_finished(*mesh.devices[1], recv, 5s);
  closer.join();
  REQUIRE(recv.state() == Request::State::failed);
  try {
    std::rethrow_exception(recv.error());
  } catch (const IoError& error) {
    CHECK(error.peer_rank() == 0);
    CHECK_THAT(std::string(error.what()), Contains("rank 1: peer rank 0 closed its context"));
  }
}

TEST_CASE("tcp progress: a mismatch found by a polling caller aborts the device", "[tcp]") {
  Mesh mesh = make_mesh(2);
  CompletionSignal signal;
  std::vector<std::byte> outgoing(16), incoming(8);
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  mesh.pair(1, 0).post_recv(recv, {5, 5}, incoming);
  mesh.pair(0, 1).post_send(send, {5, 5}, std::span<const std::byte>(outgoing));
  poll_until_finished(*mesh.devices[1], recv, 5s);
  REQUIRE(recv.state() == Request::State::failed);
  REQUIRE_THROWS_AS(std::rethrow_exception(recv.error()), MismatchError);
  REQUIRE(mesh.devices[1]->failure());
}

}  // namespace
}  // namespace chorus::transport::tcp::testing
