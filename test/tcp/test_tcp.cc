// TCP transport, data path: message sizes from 0 to 256 MiB checked byte for
// byte, tag matching and the unexpected queue, a 4-rank all-to-all, IPv6, and
// a normal close that prints nothing.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <cstdio>
#include <deque>
#include <fstream>
#include <random>
#include <sstream>

#include "base/error.h"
#include "base/log.h"
#include "test/tcp/mesh.h"

namespace chorus::transport::tcp::testing {
namespace {

std::span<const std::byte> bytes_of(const std::vector<std::byte>& data) { return data; }

TEST_CASE("tcp: messages of 0 B to 256 MiB arrive intact, receive posted before or after", "[tcp]") {
  Mesh mesh = make_mesh(2);
  CompletionSignal signal;
  const std::vector<size_t> sizes = {0, 1, 4095, size_t{1} << 20, size_t{256} << 20};
  for (size_t size : sizes) {
    INFO("message of " << size << " bytes");
    // rank 0 -> rank 1 with the receive already posted (lands in place).
    auto outgoing = pattern(size, size);
    std::vector<std::byte> incoming(size, std::byte{0x5a});
    Request recv, send;
    recv.attach(&signal);
    send.attach(&signal);
    mesh.pair(1, 0).post_recv(recv, {size + 1, 77}, incoming);
    mesh.pair(0, 1).post_send(send, {size + 1, 77}, bytes_of(outgoing));
    wait_ok(send);
    wait_ok(recv);
    REQUIRE(first_mismatch(incoming, size) == size);

    // rank 1 -> rank 0 with the receive posted after the message arrived
    // (buffered as unexpected, copied out on post).
    auto reply = pattern(size + 7, size);
    std::vector<std::byte> late(size, std::byte{0x33});
    Request late_recv, reply_send;
    late_recv.attach(&signal);
    reply_send.attach(&signal);
    mesh.pair(1, 0).post_send(reply_send, {size + 2, 78}, bytes_of(reply));
    wait_ok(reply_send);
    std::this_thread::sleep_for(size > (1u << 20) ? 300ms : 20ms);
    mesh.pair(0, 1).post_recv(late_recv, {size + 2, 78}, late);
    wait_ok(late_recv);
    REQUIRE(first_mismatch(late, size + 7) == size);
  }
}

TEST_CASE("tcp: out-of-order tags match by value, FIFO among equal values", "[tcp]") {
  Mesh mesh = make_mesh(2);
  CompletionSignal signal;
  constexpr size_t kTags = 40;
  constexpr size_t kRepeats = 3;  // messages per tag value, matched first in, first out
  std::vector<std::vector<std::byte>> payloads;
  std::deque<Request> sends;
  for (size_t repeat = 0; repeat < kRepeats; ++repeat)
    for (size_t tag = 0; tag < kTags; ++tag)
      payloads.push_back(pattern(tag * 10 + repeat, (tag * 997 + repeat * 13) % 5000));
  // Receives for the even tags are posted before anything is sent...
  std::vector<std::vector<std::byte>> received(payloads.size());
  std::deque<Request> recvs(payloads.size());
  auto post_recv = [&](size_t tag) {
    for (size_t repeat = 0; repeat < kRepeats; ++repeat) {
      size_t index = repeat * kTags + tag;
      received[index].assign(payloads[index].size(), std::byte{0});
      recvs[index].attach(&signal);
      mesh.pair(1, 0).post_recv(recvs[index], {tag, 5}, received[index]);
    }
  };
  for (size_t tag = kTags; tag-- > 0;)
    if (tag % 2 == 0) post_recv(tag);
  for (size_t index = 0; index < payloads.size(); ++index) {
    sends.emplace_back().attach(&signal);
    mesh.pair(0, 1).post_send(sends.back(), {index % kTags, 5}, bytes_of(payloads[index]));
  }
  for (auto& send : sends) wait_ok(send);
  std::this_thread::sleep_for(50ms);
  // ...the odd ones after the messages arrived, in reverse tag order.
  for (size_t tag = kTags; tag-- > 0;)
    if (tag % 2 == 1) post_recv(tag);
  for (size_t index = 0; index < payloads.size(); ++index) {
    recvs[index].wait(Deadline::never(), "test: never");  // an unbounded wait must work too
    INFO("tag " << index % kTags << ", repeat " << index / kTags);
    REQUIRE(received[index] == payloads[index]);
  }
}

TEST_CASE("tcp: a receive posted while its message is still arriving", "[tcp]") {
  Mesh mesh = make_mesh(2);
  CompletionSignal signal;
  // Large enough that the post lands while the unexpected payload streams in.
  const size_t size = size_t{64} << 20;
  auto outgoing = pattern(3, size);
  std::vector<std::byte> incoming(size);
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  mesh.pair(0, 1).post_send(send, {9, 1}, bytes_of(outgoing));
  std::this_thread::sleep_for(2ms);
  mesh.pair(1, 0).post_recv(recv, {9, 1}, incoming);
  wait_ok(send);
  wait_ok(recv);
  REQUIRE(first_mismatch(incoming, 3) == size);
}

TEST_CASE("tcp: four ranks exchange all-to-all concurrently", "[tcp]") {
  constexpr int kRanks = 4;
  constexpr size_t kRounds = 30;
  Mesh mesh = make_mesh(kRanks);
  std::vector<std::thread> ranks;
  std::atomic<int> bad{0};
  auto seed = [](int from, int to, size_t round) { return (from * 31 + to) * 1000 + round; };
  auto size_of = [](int from, int to, size_t round) { return (round * 7919 + from * 104729 + to * 17) % 300000; };
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] {
      CompletionSignal signal;
      std::deque<Request> requests;
      std::vector<std::vector<std::byte>> outgoing, incoming;
      std::vector<size_t> seeds;
      for (size_t round = 0; round < kRounds; ++round)
        for (int peer = 0; peer < kRanks; ++peer) {
          if (peer == rank) continue;
          outgoing.push_back(pattern(seed(rank, peer, round), size_of(rank, peer, round)));
          incoming.emplace_back(size_of(peer, rank, round));
          seeds.push_back(seed(peer, rank, round));
        }
      for (size_t i = 0, round = 0; round < kRounds; ++round)
        for (int peer = 0; peer < kRanks; ++peer) {
          if (peer == rank) continue;
          requests.emplace_back().attach(&signal);
          mesh.pair(rank, peer).post_recv(requests.back(), {round, 0}, incoming[i]);
          requests.emplace_back().attach(&signal);
          mesh.pair(rank, peer).post_send(requests.back(), {round, 0}, bytes_of(outgoing[i]));
          ++i;
        }
      for (auto& request : requests) wait_ok(request);
      for (size_t i = 0; i < incoming.size(); ++i)
        if (first_mismatch(incoming[i], seeds[i]) != incoming[i].size()) ++bad;
    });
  }
  for (auto& thread : ranks) thread.join();
  REQUIRE(bad == 0);
}

TEST_CASE("tcp: IPv6 loopback", "[tcp]") {
  TcpDeviceOptions options;
  options.hostname = "::1";
  Mesh mesh = make_mesh(3, options);
  CompletionSignal signal;
  auto outgoing = pattern(11, 100000);
  std::vector<std::byte> incoming(outgoing.size());
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  mesh.pair(2, 0).post_recv(recv, {1, 2}, incoming);
  mesh.pair(0, 2).post_send(send, {1, 2}, bytes_of(outgoing));
  wait_ok(send);
  wait_ok(recv);
  REQUIRE(incoming == outgoing);
}

TEST_CASE("tcp: the default address (default route or loopback) works", "[tcp]") {
  TcpDeviceOptions options;
  options.interface = "";
  Mesh mesh;
  for (int rank = 0; rank < 2; ++rank) {
    options.rank = rank;
    options.size = 2;
    mesh.devices.push_back(create_device(options));  // no hostname: the automatic choice
  }
  connect_mesh(mesh);
  CompletionSignal signal;
  std::vector<std::byte> outgoing = pattern(1, 10), incoming(10);
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  mesh.pair(0, 1).post_recv(recv, {0, 0}, incoming);
  mesh.pair(1, 0).post_send(send, {0, 0}, bytes_of(outgoing));
  wait_ok(send);
  wait_ok(recv);
  REQUIRE(incoming == outgoing);
}

TEST_CASE("tcp: bad options are clear errors", "[tcp]") {
  TcpDeviceOptions options;
  options.size = 2;
  options.interface = "no-such-interface0";
  REQUIRE_THROWS_AS(create_device(options), InvalidArgument);
  options.interface = "";
  options.hostname = "no-such-host.invalid";
  REQUIRE_THROWS_AS(create_device(options), InvalidArgument);
  options.hostname = "127.0.0.1";
  options.rank = 2;
  REQUIRE_THROWS_AS(create_device(options), InvalidArgument);
  options.rank = 0;
  auto device = create_device(options);
  std::vector<std::byte> junk(48, std::byte{1});
  REQUIRE_THROWS_AS(device->connect(1, junk, Deadline::after(100ms)), InvalidArgument);
  REQUIRE_THROWS_AS(device->connect(0, device->address(), Deadline::after(100ms)), InvalidArgument);
  // An address blob of rank 0 handed in as rank 1's.
  REQUIRE_THROWS_AS(device->connect(1, device->address(), Deadline::after(100ms)), InvalidArgument);
}

TEST_CASE("tcp: a normal job end prints nothing at the default log level", "[tcp]") {
  // Redirect stderr into a file around a whole job: create, exchange, destroy.
  std::string path = cat("/tmp/chorus_tcp_quiet_", ::getpid(), ".log");
  int saved = ::dup(2);
  int file = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  REQUIRE(file >= 0);
  ::dup2(file, 2);
  {
    Mesh mesh = make_mesh(3);
    CompletionSignal signal;
    std::deque<Request> requests;
    std::vector<std::vector<std::byte>> buffers;
    for (int rank = 0; rank < 3; ++rank)
      for (int peer = 0; peer < 3; ++peer) {
        if (peer == rank) continue;
        buffers.push_back(pattern(rank, 1000));
        requests.emplace_back().attach(&signal);
        mesh.pair(rank, peer).post_send(requests.back(), {1, 1}, bytes_of(buffers.back()));
        buffers.emplace_back(1000);
        requests.emplace_back().attach(&signal);
        mesh.pair(rank, peer).post_recv(requests.back(), {1, 1}, buffers.back());
      }
    for (auto& request : requests) wait_ok(request);
    // Ranks leave one after another, as they do at the end of a real job.
    mesh.destroy(1);
    std::this_thread::sleep_for(20ms);
    mesh.destroy(0);
    mesh.destroy(2);
  }
  ::dup2(saved, 2);
  ::close(saved);
  ::close(file);
  std::ifstream log(path);
  std::stringstream text;
  text << log.rdbuf();
  ::unlink(path.c_str());
  if (!log_enabled(LogLevel::info)) REQUIRE(text.str() == "");
}

}  // namespace
}  // namespace chorus::transport::tcp::testing

namespace chorus::transport::tcp::testing {
namespace {

// Run by hand (needs ~5 GiB of memory): test_tcp "[large]".
TEST_CASE("tcp: a message larger than 2^32 bytes", "[.large]") {
  Mesh mesh = make_mesh(2);
  const size_t size = (size_t{1} << 32) + 4099;
  // Word patterns keep filling and checking 4 GiB fast.
  std::vector<uint64_t> outgoing(size / 8 + 1), incoming(size / 8 + 1);
  for (size_t i = 0; i < outgoing.size(); ++i) outgoing[i] = i * 0x9E3779B97F4A7C15ull + 1;
  CompletionSignal signal;
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  auto* out = reinterpret_cast<const std::byte*>(outgoing.data());
  auto* in = reinterpret_cast<std::byte*>(incoming.data());
  mesh.pair(1, 0).post_recv(recv, {1, 1}, std::span<std::byte>(in, size));
  mesh.pair(0, 1).post_send(send, {1, 1}, std::span<const std::byte>(out, size));
  wait_ok(send, 120s);
  wait_ok(recv, 120s);
  REQUIRE(std::memcmp(out, in, size) == 0);
  REQUIRE((incoming.back() >> 24) == 0);  // nothing past the message's end
}

// Run by hand: test_tcp "[benchmark]". Numbers feed the link model defaults.
TEST_CASE("tcp: ping-pong latency and streaming throughput on loopback", "[.benchmark]") {
  Mesh mesh = make_mesh(2);
  auto ping_pong = [&](size_t bytes, int iterations) {
    std::vector<std::byte> out(bytes, std::byte{1}), in(bytes);
    std::thread echo([&] {
      CompletionSignal signal;
      std::vector<std::byte> buffer(bytes);
      for (int i = 0; i < iterations; ++i) {
        Request recv, send;
        recv.attach(&signal);
        send.attach(&signal);
        mesh.pair(1, 0).post_recv(recv, {static_cast<uint64_t>(i), 0}, buffer);
        wait_ok(recv);
        mesh.pair(1, 0).post_send(send, {static_cast<uint64_t>(i), 0}, bytes_of(buffer));
        wait_ok(send);
      }
    });
    CompletionSignal signal;
    auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) {
      Request recv, send;
      recv.attach(&signal);
      send.attach(&signal);
      mesh.pair(0, 1).post_recv(recv, {static_cast<uint64_t>(i), 0}, in);
      mesh.pair(0, 1).post_send(send, {static_cast<uint64_t>(i), 0}, bytes_of(out));
      wait_ok(send);
      wait_ok(recv);
    }
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    echo.join();
    return seconds / iterations / 2;
  };
  double latency = ping_pong(8, 20000);
  std::printf("tcp loopback: one-way latency of 8 B = %.1f us\n", latency * 1e6);

  const size_t size = size_t{64} << 20;
  const int iterations = 30;
  std::vector<std::byte> out(size, std::byte{2}), in(size);
  CompletionSignal signal;
  std::deque<Request> requests;
  auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    requests.emplace_back().attach(&signal);
    mesh.pair(1, 0).post_recv(requests.back(), {static_cast<uint64_t>(i), 0}, in);
    requests.emplace_back().attach(&signal);
    mesh.pair(0, 1).post_send(requests.back(), {static_cast<uint64_t>(i), 0}, bytes_of(out));
  }
  for (auto& request : requests) wait_ok(request);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("tcp loopback: 64 MiB messages stream at %.2f GB/s\n", size * iterations / seconds / 1e9);
  double pingpong_big = ping_pong(size, 5);
  std::printf("tcp loopback: 64 MiB ping-pong one-way %.1f ms (%.2f GB/s)\n", pingpong_big * 1e3,
              size / pingpong_big / 1e9);
}

}  // namespace
}  // namespace chorus::transport::tcp::testing
