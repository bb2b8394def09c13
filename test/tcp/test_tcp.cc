// TCP transport, what only TCP has: IPv6, the default address, its options,
// and a loopback benchmark run by hand. Everything every transport must do
// (sizes, tags, failures, polling, hostile connections) is in the
// conformance suite, test/transport/, which runs over TCP too.
#include <cstdio>
#include <thread>

#include "base/error.h"
#include "test/transport/conformance.h"
#include "transport/tcp/tcp.h"

namespace chorus::transport::testing {
namespace {

DeviceOptions tcp_options(std::string hostname, std::string interface = "") {
  DeviceOptions options = default_options();
  options.hostname = std::move(hostname);
  options.interface = std::move(interface);
  return options;
}

// One message of `bytes` from rank `from` to rank `to`, checked.
void check_exchange(TestMesh& mesh, int from, int to, size_t bytes) {
  Requests requests;
  const Buffer outgoing = pattern(11, bytes);
  ReceiveBuffer incoming(bytes);
  Request& recv = requests.add();
  Request& send = requests.add();
  mesh.pair(to, from).post_recv(recv, {1, 2}, incoming.data());
  mesh.pair(from, to).post_send(send, {1, 2}, outgoing);
  wait_ok(send);
  wait_ok(recv);
  REQUIRE(incoming.holds(11));
}

// A polling caller leaves its sockets parked for the next collective
// (docs/latency.md, "Parked between calls"); the progress thread must take
// them back by itself, or bytes that arrive between collectives (a probe, an
// abort, a message nobody polls for) would wait for the next caller.
TEST_CASE("tcp: sockets a polling caller left parked are read by the progress thread again", "[tcp]") {
  Requests requests;  // outlives the mesh: the sends are never waited on
  TestMesh mesh = make_mesh("tcp", 2, Waiting::by_test);
  for (const auto pause : {0ms, 20ms}) {
    INFO("the message leaves " << pause.count() << " ms after the scope ends");
    const Buffer outgoing = pattern(21, 4096);
    ReceiveBuffer incoming(outgoing.size());
    // One exchange polled for under a scope parks rank 1's socket.
    {
      PollingScope<Device> polling(mesh.device(1));
      const Buffer first = pattern(20, 64);
      ReceiveBuffer arrived(first.size());
      Request& polled = requests.add();
      mesh.pair(1, 0).post_recv(polled, {3, 3}, arrived.data());
      mesh.pair(0, 1).post_send(requests.add(), {3, 3}, first);
      REQUIRE(poll_until_finished(mesh.device(1), polled));
      CHECK(arrived.holds(20));
    }
    std::this_thread::sleep_for(pause);
    Request& recv = requests.add();
    mesh.pair(1, 0).post_recv(recv, {3, 4}, incoming.data());
    mesh.pair(0, 1).post_send(requests.add(), {3, 4}, outgoing);
    // No caller polls or waits in a scope: only the progress thread reads.
    const auto start = Clock::now();
    recv.wait(Deadline::after(5s), "test: the message to a parked socket");
    CHECK(seconds_since(start) < 0.5);
    CHECK(incoming.holds(21));
  }
}

TEST_CASE("tcp: IPv6 loopback", "[tcp]") {
  TestMesh mesh = make_mesh("tcp", 3, Waiting::asleep, tcp_options("::1"));
  check_exchange(mesh, 0, 2, 100000);
}

TEST_CASE("tcp: the default address (default route or loopback) works", "[tcp]") {
  // No hostname or interface: the automatic choice.
  TestMesh mesh = make_mesh("tcp", 2, Waiting::asleep, tcp_options(""));
  check_exchange(mesh, 1, 0, 10);
}

TEST_CASE("tcp: bad options are clear errors", "[tcp]") {
  tcp::TcpDeviceOptions options;
  options.size = 2;
  options.interface = "no-such-interface0";
  REQUIRE_THROWS_AS(tcp::create_device(options), InvalidArgument);
  options.interface = "";
  options.hostname = "no-such-host.invalid";
  REQUIRE_THROWS_AS(tcp::create_device(options), InvalidArgument);
  // An address blob of rank 0 handed in as rank 1's: the blob names its owner.
  options.hostname = "127.0.0.1";
  auto device = tcp::create_device(options);
  REQUIRE_THROWS_AS(device->connect(1, device->address(), Deadline::after(100ms)), InvalidArgument);
}

// Run by hand: test_tcp "[benchmark]". Numbers feed the link model defaults.
TEST_CASE("tcp: ping-pong latency and streaming throughput on loopback", "[.benchmark]") {
  TestMesh mesh = make_mesh("tcp", 2);
  auto ping_pong = [&](size_t bytes, int iterations) {
    const Buffer out = pattern(1, bytes);
    Buffer in(bytes);
    std::thread echo([&] {
      Buffer buffer(bytes);
      for (int i = 0; i < iterations; ++i) {
        Requests requests;
        Request& recv = requests.add();
        Request& send = requests.add();
        mesh.pair(1, 0).post_recv(recv, {static_cast<uint64_t>(i), 0}, buffer.bytes());
        wait_ok(recv);
        mesh.pair(1, 0).post_send(send, {static_cast<uint64_t>(i), 0}, buffer);
        wait_ok(send);
      }
    });
    auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) {
      Requests requests;
      Request& recv = requests.add();
      Request& send = requests.add();
      mesh.pair(0, 1).post_recv(recv, {static_cast<uint64_t>(i), 0}, in.bytes());
      mesh.pair(0, 1).post_send(send, {static_cast<uint64_t>(i), 0}, out);
      wait_ok(send);
      wait_ok(recv);
    }
    const double seconds = seconds_since(start);
    echo.join();
    return seconds / iterations / 2;
  };
  const double latency = ping_pong(8, 20000);
  std::printf("tcp loopback: one-way latency of 8 B = %.1f us\n", latency * 1e6);

  const size_t size = size_t{64} << 20;
  const int iterations = 30;
  const Buffer out = pattern(2, size);
  Buffer in(size);
  Requests requests;
  auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    mesh.pair(1, 0).post_recv(requests.add(), {static_cast<uint64_t>(i), 0}, in.bytes());
    mesh.pair(0, 1).post_send(requests.add(), {static_cast<uint64_t>(i), 0}, out);
  }
  for (Request& request : requests.all()) wait_ok(request);
  const double seconds = seconds_since(start);
  std::printf("tcp loopback: 64 MiB messages stream at %.2f GB/s\n", size * iterations / seconds / 1e9);
  const double pingpong_big = ping_pong(size, 5);
  std::printf("tcp loopback: 64 MiB ping-pong one-way %.1f ms (%.2f GB/s)\n", pingpong_big * 1e3,
              size / pingpong_big / 1e9);
}

}  // namespace
}  // namespace chorus::transport::testing
