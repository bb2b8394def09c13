// Transport conformance, caller-side progress (Device::progress, polling and
// waiting scopes): callers that move bytes themselves while the transport's
// own thread also runs must land every byte exactly once, a polling scope
// leaves the work to its caller, and abort and a mismatch behave as they do
// without polling (a closing peer: test_failures.cc).
#include <chrono>
#include <cstdlib>
#include <thread>

#include "test/transport/conformance.h"

namespace chorus::transport::testing {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("transport progress: polling callers and the transport's thread share the work without losing a byte",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  TestMesh mesh = make_mesh(transport, 2, Waiting::by_test);
  // Sizes from empty to beyond the transports' thresholds (tcp's staging
  // buffer, shm's pull threshold, record and ring), so payloads land by
  // every path, split between the threads that move them.
  const std::vector<size_t> sizes = {0, 1, 8, 4096, 65535, 65536, 300000, (size_t{1} << 20) + 1};
  constexpr int kRounds = 240;
  std::atomic<int> bad{0}, errors{0};
  std::atomic<bool> stop{false};
  // Each rank's waiting changes every round: a polling scope and progress()
  // on this thread; a waiting scope with the transport's thread doing the
  // work; progress() with no scope at all.
  auto rank_loop = [&](int rank) {
    const int peer = 1 - rank;
    Device& device = mesh.device(rank);
    Requests requests;
    try {
      for (int round = 0; round < kRounds; ++round) {
        const size_t size = sizes[static_cast<size_t>(round) % sizes.size()];
        const auto seed = static_cast<uint64_t>(round * 2 + rank);
        const auto outgoing = pattern(seed, size);
        ReceiveBuffer incoming(size);
        Request& send = requests.add();
        Request& recv = requests.add();
        const Tag tag{static_cast<uint64_t>(round), 9};
        // Odd rounds post the receive late, so some messages wait as unexpected.
        if (round % 2 == 0) mesh.pair(rank, peer).post_recv(recv, tag, incoming.data());
        mesh.pair(rank, peer).post_send(send, tag, outgoing);
        if (round % 2 == 1) mesh.pair(rank, peer).post_recv(recv, tag, incoming.data());
        const int mode = (round / 2 + rank) % 3;
        bool finished = true;
        if (mode == 0) {
          PollingScope<Device> polling(device);
          finished = poll_until_finished(device, recv) && poll_until_finished(device, send);
        } else if (mode == 1) {
          WaitingScope<Device> waiting(device);
          wait_ok(recv);
          wait_ok(send);
        } else {
          finished = poll_until_finished(device, recv) && poll_until_finished(device, send);
        }
        if (!finished) throw std::runtime_error(cat("round ", round, ": timed out polling"));
        wait_ok(recv, 1ms);  // rethrows a failure
        if (!incoming.holds(static_cast<uint64_t>(round * 2 + peer))) ++bad;
      }
    } catch (const std::exception& error) {
      std::fprintf(stderr, "rank %d: %s\n", rank, error.what());
      ++errors;
      device.abort(std::current_exception());
    }
  };
  // A second caller per device polls in bursts and sleeps in between, as
  // the collectives of a split Context on another thread would.
  auto companion = [&](int rank) {
    Device& device = mesh.device(rank);
    while (!stop.load()) {
      {
        PollingScope<Device> polling(device);
        for (int i = 0; i < 200; ++i) device.progress();
      }
      WaitingScope<Device> waiting(device);
      std::this_thread::sleep_for(200us);
    }
  };
  std::thread other(rank_loop, 1);
  std::thread companion0(companion, 0), companion1(companion, 1);
  rank_loop(0);
  other.join();
  stop.store(true);
  companion0.join();
  companion1.join();
  REQUIRE(errors.load() == 0);
  REQUIRE(bad.load() == 0);
  REQUIRE_FALSE(mesh.device(0).failure());
  REQUIRE_FALSE(mesh.device(1).failure());
}

TEST_CASE("transport progress: inside a polling scope the caller does the work, and hands it back after",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;
  TestMesh mesh = make_mesh(transport, 2, Waiting::by_test);
  const auto outgoing = pattern(7, 100000);
  ReceiveBuffer incoming(outgoing.size());
  Request& send = requests.add();
  Request& recv = requests.add();
  {
    PollingScope<Device> polling(mesh.device(1));
    mesh.pair(1, 0).post_recv(recv, {1, 1}, incoming.data());
    mesh.pair(0, 1).post_send(send, {1, 1}, outgoing);
    // The transport's thread leaves the work to this caller: nothing lands
    // until it calls progress() (100 KB fit in loopback's socket buffers).
    std::this_thread::sleep_for(50ms);
    CHECK(recv.state() == Request::State::pending);
    REQUIRE(poll_until_finished(mesh.device(1), recv));
    REQUIRE(recv.state() == Request::State::done);
    CHECK(incoming.holds(7));
  }
  WaitingScope<Device> sender_waits(mesh.device(0));
  wait_ok(send);
  // Out of the scope, with the caller asleep, the transport's thread works again.
  WaitingScope<Device> receiver_waits(mesh.device(1));
  ReceiveBuffer late_incoming(outgoing.size());
  Request& late = requests.add();
  mesh.pair(1, 0).post_recv(late, {2, 2}, late_incoming.data());
  mesh.pair(0, 1).post_send(requests.add(), {2, 2}, outgoing);
  wait_ok(late);
  CHECK(late_incoming.holds(7));
}

TEST_CASE("transport progress: await_arrival sleeps until bytes arrive, and only while a receive waits",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;
  TestMesh mesh = make_mesh(transport, 2, Waiting::by_test);
  Device& receiver = mesh.device(1);
  PollingScope<Device> polling(receiver);
  using Clock = std::chrono::steady_clock;
  // Nothing pending: nothing to sleep for, on every transport.
  auto began = Clock::now();
  CHECK_FALSE(receiver.await_arrival(std::chrono::microseconds(500'000)));
  CHECK(Clock::now() - began < 250ms);

  const auto outgoing = pattern(11, 300000);
  ReceiveBuffer incoming(outgoing.size());
  Request& recv = requests.add();
  mesh.pair(1, 0).post_recv(recv, {3, 3}, incoming.data());
  began = Clock::now();
  const bool slept = receiver.await_arrival(std::chrono::microseconds(60'000));
  const auto quiet = Clock::now() - began;
  // Only tcp can tell from its sockets, and not under TLS (records hide
  // readiness); the others must refuse at once.
  const char* tls = std::getenv("CHORUS_TLS_CERT");
  const bool tells = transport == "tcp" && !(tls && *tls);
  if (!tells) {
    CHECK_FALSE(slept);
    CHECK(quiet < 50ms);
  } else {
    CHECK(slept);
    CHECK(quiet >= 40ms);  // nothing arrived: the whole limit, less the clock's slack
    CHECK(recv.state() == Request::State::pending);
    // Bytes sent while it sleeps end the sleep long before its limit (a
    // limit of seconds: one poll(), not a spin of short ones).
    std::thread sender([&] {
      std::this_thread::sleep_for(30ms);
      mesh.pair(0, 1).post_send(requests.add(), {3, 3}, outgoing);
    });
    began = Clock::now();
    CHECK(receiver.await_arrival(std::chrono::microseconds(5'000'000)));
    const auto woken = Clock::now() - began;
    sender.join();
    CHECK(woken >= 20ms);
    CHECK(woken < 2s);
  }
  if (!tells) mesh.pair(0, 1).post_send(requests.add(), {3, 3}, outgoing);
  REQUIRE(poll_until_finished(receiver, recv));
  CHECK(incoming.holds(11));
}

TEST_CASE("transport progress: a polling caller hears an abort from a peer it expects nothing from",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  // A rank waiting on rank 2 must still learn at once that rank 0 aborted
  // (say, on seeing a third rank die), though its caller polls and reads
  // only what it waits for.
  Requests requests;
  TestMesh mesh = make_mesh(transport, 3, Waiting::by_test);
  ReceiveBuffer incoming(10);
  Request& recv = requests.add();
  PollingScope<Device> polling(mesh.device(1));
  // Rank 2 "polls" too but never calls progress(), so it cannot relay rank 0's abort.
  PollingScope<Device> deaf(mesh.device(2));
  mesh.pair(1, 2).post_recv(recv, {3, 3}, incoming.data());  // rank 2 never sends
  std::thread aborter([&] {
    std::this_thread::sleep_for(20ms);
    mesh.device(0).abort(std::make_exception_ptr(IoError("rank 0: lost peer rank 3", 3)));
  });
  const bool finished = poll_until_finished(mesh.device(1), recv, 5s);
  aborter.join();
  REQUIRE(finished);
  REQUIRE(recv.state() == Request::State::failed);
  REQUIRE_THROWS_WITH(std::rethrow_exception(recv.error()), Contains("lost peer rank 3"));
}

TEST_CASE("transport progress: after abort returns, a polling caller lands no byte", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  check_no_byte_lands_after_abort(transport, [](TestMesh& mesh, const std::atomic<bool>& stop) {
    PollingScope<Device> polling(mesh.device(1));
    while (!stop.load()) mesh.device(1).progress();
  });
}

TEST_CASE("transport progress: a mismatch found by a polling caller aborts the device", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;
  TestMesh mesh = make_mesh(transport, 2, Waiting::by_test);
  const std::vector<std::byte> outgoing(16);
  ReceiveBuffer incoming(8);
  Request& send = requests.add();
  Request& recv = requests.add();
  PollingScope<Device> polling(mesh.device(1));
  mesh.pair(1, 0).post_recv(recv, {5, 5}, incoming.data());
  mesh.pair(0, 1).post_send(send, {5, 5}, outgoing);
  REQUIRE(poll_until_finished(mesh.device(1), recv, 5s));
  REQUIRE(recv.state() == Request::State::failed);
  REQUIRE_THROWS_AS(std::rethrow_exception(recv.error()), MismatchError);
  REQUIRE(mesh.device(1).failure());
  CHECK(incoming.untouched());
}

}  // namespace
}  // namespace chorus::transport::testing
