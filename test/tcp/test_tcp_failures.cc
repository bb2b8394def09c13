// TCP transport, failure paths: mismatched messages, peers that close, abort
// or die mid-transfer, hostile connections on the listening port, and
// addresses nobody answers.
#include <arpa/inet.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <random>

#include "base/error.h"
#include "base/log.h"
#include "test/tcp/mesh.h"
#include "transport/tcp/address.h"
#include "transport/tcp/frame.h"

namespace chorus::transport::tcp::testing {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST_CASE("tcp: a length mismatch fails the receiver with MismatchError", "[tcp]") {
  bool posted_first = GENERATE(true, false);
  INFO((posted_first ? "receive posted before arrival" : "receive posted after arrival"));
  Mesh mesh = make_mesh(3);
  CompletionSignal signal;
  std::vector<std::byte> outgoing = pattern(1, 100), incoming(200);
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  if (posted_first) mesh.pair(1, 0).post_recv(recv, {0x500000001, 4}, incoming);
  mesh.pair(0, 1).post_send(send, {0x500000001, 4}, std::span<const std::byte>(outgoing));
  wait_ok(send);
  if (!posted_first) {
    std::this_thread::sleep_for(50ms);
    mesh.pair(1, 0).post_recv(recv, {0x500000001, 4}, incoming);
  }
  std::string text = wait_error<MismatchError>(recv);
  CHECK_THAT(text, Contains("rank 1: peer rank 0 sent"));
  CHECK_THAT(text, Contains("(100 bytes) but this rank expected"));
  CHECK_THAT(text, Contains("(200 bytes) for tag 0x500000001"));
  // The receiver's device is finished: later posts fail at once with the same error.
  Request later;
  later.attach(&signal);
  mesh.pair(1, 2).post_recv(later, {1, 1}, incoming);
  REQUIRE(later.state() == Request::State::failed);
  REQUIRE_THROWS_AS(later.wait(Deadline::after(1ms), "x"), MismatchError);
  // Its peers learn why through the abort frame.
  auto give_up = Clock::now() + 2s;
  while ((!mesh.devices[0]->failure() || !mesh.devices[2]->failure()) && Clock::now() < give_up)
    std::this_thread::sleep_for(1ms);
  REQUIRE(mesh.devices[2]->failure());
  try {
    std::rethrow_exception(mesh.devices[2]->failure());
  } catch (const MismatchError& error) {
    // Directly from rank 1, or relayed by rank 0 if its abort frame came first.
    CHECK_THAT(error.what(), StartsWith("rank 2: peer rank "));
    CHECK_THAT(error.what(), Contains("aborted: rank 1: peer rank 0 sent"));
  }
}

TEST_CASE("tcp: a signature mismatch names both calls", "[tcp]") {
  TcpDeviceOptions options;
  options.describe_signature = [](uint64_t signature) { return cat("allreduce #", signature); };
  Mesh mesh = make_mesh(2, options);
  CompletionSignal signal;
  std::vector<std::byte> outgoing = pattern(1, 64), incoming(64);
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  mesh.pair(0, 1).post_recv(recv, {7, 1}, incoming);
  mesh.pair(1, 0).post_send(send, {7, 2}, std::span<const std::byte>(outgoing));
  std::string text = wait_error<MismatchError>(recv);
  CHECK_THAT(text, Contains("rank 0: peer rank 1 sent allreduce #2 (64 bytes) but this rank expected "
                            "allreduce #1 (64 bytes) for tag 0x7"));
  // Not one byte of the wrong call may land in the buffer.
  REQUIRE(incoming == std::vector<std::byte>(64));
}

TEST_CASE("tcp: a peer that closes its context fails the waiter quickly", "[tcp]") {
  Mesh mesh = make_mesh(2);
  CompletionSignal signal;
  std::vector<std::byte> incoming(10);
  Request recv;
  recv.attach(&signal);
  mesh.pair(1, 0).post_recv(recv, {3, 3}, incoming);
  auto start = Clock::now();
  mesh.destroy(0);
  std::string text = wait_error<IoError>(recv);
  double elapsed = seconds_since(start);
  CHECK(elapsed < 1.0);
  CHECK_THAT(text, Contains("rank 1: peer rank 0 closed its context"));
  try {
    std::rethrow_exception(recv.error());
  } catch (const IoError& error) {
    CHECK(error.peer_rank() == 0);
  }
  // Later operations fail at once.
  Request later;
  later.attach(&signal);
  mesh.pair(1, 0).post_send(later, {4, 4}, std::span<const std::byte>(incoming));
  REQUIRE(later.state() == Request::State::failed);
}

TEST_CASE("tcp: abort fails everything here and tells every peer why", "[tcp]") {
  Mesh mesh = make_mesh(3);
  CompletionSignal signal;
  std::vector<std::byte> a(10), b(10);
  Request waiting_on_0, own;
  waiting_on_0.attach(&signal);
  own.attach(&signal);
  mesh.pair(1, 0).post_recv(waiting_on_0, {3, 3}, a);
  mesh.pair(0, 2).post_recv(own, {3, 3}, b);
  auto start = Clock::now();
  mesh.devices[0]->abort(std::make_exception_ptr(Aborted("rank 0: stopped by the test")));
  // Synchronous: our own request is already failed when abort returns.
  REQUIRE(own.state() == Request::State::failed);
  REQUIRE_THROWS_AS(own.wait(Deadline::after(1ms), "x"), Aborted);
  std::string text = wait_error<Aborted>(waiting_on_0);
  CHECK(seconds_since(start) < 1.0);
  CHECK(text == "rank 1: peer rank 0 aborted: rank 0: stopped by the test");
  // Idempotent: the first reason stays.
  mesh.devices[0]->abort(std::make_exception_ptr(IoError("second")));
  REQUIRE_THROWS_AS(std::rethrow_exception(mesh.devices[0]->failure()), Aborted);
  Request later;
  later.attach(&signal);
  mesh.pair(0, 1).post_send(later, {1, 1}, std::span<const std::byte>(a));
  REQUIRE(later.state() == Request::State::failed);
  auto give_up = Clock::now() + 2s;
  while (!mesh.devices[2]->failure() && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
  REQUIRE(mesh.devices[2]->failure());
}

TEST_CASE("tcp: after abort returns, no byte lands in the receive buffer", "[tcp]") {
  check_no_byte_lands_after_abort();
}

// A plain client socket connected to a device's listening port.
int raw_connect(const ListenerAddress& address) {
  int fd = ::socket(address.socket.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  REQUIRE(::connect(fd, address.socket.get(), address.socket.length()) == 0);
  return fd;
}

std::vector<std::byte> hello_bytes(uint64_t nonce, uint32_t dialer, uint32_t listener) {
  std::vector<std::byte> hello(24);
  store_le(hello.data() + 0, 0x53484843, 4);  // "CHHS"
  store_le(hello.data() + 4, kWireVersion, 2);
  store_le(hello.data() + 7, 1, 1);  // stream 0 of 1
  store_le(hello.data() + 8, nonce, 8);
  store_le(hello.data() + 16, dialer, 4);
  store_le(hello.data() + 20, listener, 4);
  return hello;
}

// True when the device closed our socket (EOF or reset) within the time limit.
bool closed_by_device(int fd, std::chrono::milliseconds limit) {
  timeval timeout{0, static_cast<suseconds_t>(limit.count() * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

TEST_CASE("tcp: garbage and foreign hellos are dropped; real peers still connect", "[tcp]") {
  Mesh mesh;
  mesh.devices = make_devices(2);
  ListenerAddress listener = decode_address(mesh.devices[0]->address(), 1, 0);

  int random_client = raw_connect(listener);
  std::mt19937_64 random(42);
  std::vector<uint64_t> noise(16);
  for (auto& word : noise) word = random();
  REQUIRE(::send(random_client, noise.data(), noise.size() * 8, MSG_NOSIGNAL) == 128);

  int wrong_nonce = raw_connect(listener);
  auto hello = hello_bytes(listener.nonce ^ 0x1, 1, 0);
  REQUIRE(::send(wrong_nonce, hello.data(), hello.size(), MSG_NOSIGNAL) == 24);

  int bad_rank = raw_connect(listener);
  hello = hello_bytes(listener.nonce, 9, 0);
  REQUIRE(::send(bad_rank, hello.data(), hello.size(), MSG_NOSIGNAL) == 24);

  int silent = raw_connect(listener);  // says nothing; must not block anyone

  connect_mesh(mesh);
  CompletionSignal signal;
  std::vector<std::byte> outgoing = pattern(5, 5000), incoming(5000);
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  mesh.pair(0, 1).post_recv(recv, {1, 1}, incoming);
  mesh.pair(1, 0).post_send(send, {1, 1}, std::span<const std::byte>(outgoing));
  wait_ok(send);
  wait_ok(recv);
  REQUIRE(incoming == outgoing);

  CHECK(closed_by_device(random_client, 2s));
  CHECK(closed_by_device(wrong_nonce, 2s));
  CHECK(closed_by_device(bad_rank, 2s));

  // A valid hello for a rank that is already connected is a duplicate.
  int duplicate = raw_connect(listener);
  hello = hello_bytes(listener.nonce, 1, 0);
  REQUIRE(::send(duplicate, hello.data(), hello.size(), MSG_NOSIGNAL) == 24);
  CHECK(closed_by_device(duplicate, 2s));

  // None of it disturbed the job.
  REQUIRE_FALSE(mesh.devices[0]->failure());
  REQUIRE_FALSE(mesh.devices[1]->failure());
  for (int fd : {random_client, wrong_nonce, bad_rank, silent, duplicate}) ::close(fd);
}

TEST_CASE("tcp: connecting to a dead address times out within the deadline", "[tcp]") {
  auto dead = make_devices(2);
  auto dead_address = dead[0]->address();
  auto silent_peer_address = dead[1]->address();
  dead[0].reset();  // nothing listens there any more

  TcpDeviceOptions options;
  options.hostname = "127.0.0.1";
  options.rank = 1;
  options.size = 2;
  auto dialer = create_device(options);
  auto start = Clock::now();
  try {
    dialer->connect(0, dead_address, Deadline::after(400ms));
    FAIL("connect to a dead address succeeded");
  } catch (const TimeoutError& error) {
    CHECK_THAT(error.what(), Contains("rank 1: timed out"));
    CHECK_THAT(error.what(), Contains("peer rank 0 (127.0.0.1:"));
  } catch (const IoError& error) {
    CHECK(error.peer_rank() == 0);
  }
  double elapsed = seconds_since(start);
  CHECK(elapsed < 1.0);

  // The lower rank waits for a dialer that never comes.
  options.rank = 0;
  auto waiter = create_device(options);
  start = Clock::now();
  try {
    waiter->connect(1, silent_peer_address, Deadline::after(300ms));
    FAIL("connect without a dialer succeeded");
  } catch (const TimeoutError& error) {
    CHECK_THAT(error.what(), Contains("waiting for peer rank 1"));
  }
  elapsed = seconds_since(start);
  CHECK(elapsed >= 0.29);
  CHECK(elapsed < 1.0);
}

// Reads exactly `bytes` from a pipe (the fork test's address exchange).
bool read_exact(int fd, void* out, size_t bytes) {
  auto* cursor = static_cast<char*>(out);
  while (bytes > 0) {
    ssize_t n = ::read(fd, cursor, bytes);
    if (n <= 0) return false;
    cursor += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

TEST_CASE("tcp: a peer killed with SIGKILL mid-transfer is detected promptly", "[tcp]") {
  int to_child[2], to_parent[2];
  REQUIRE(::pipe(to_child) == 0);
  REQUIRE(::pipe(to_parent) == 0);
  constexpr size_t kChunk = size_t{64} << 20;
  constexpr int kMessages = 16;
  TcpDeviceOptions options;
  options.hostname = "127.0.0.1";
  options.size = 2;
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Rank 1: start streaming 1 GiB to rank 0, then die without a word.
    try {
      options.rank = 1;
      auto device = create_device(options);
      auto mine = device->address();
      std::vector<std::byte> theirs(mine.size());
      if (::write(to_parent[1], mine.data(), mine.size()) != static_cast<ssize_t>(mine.size())) ::_exit(2);
      if (!read_exact(to_child[0], theirs.data(), theirs.size())) ::_exit(3);
      auto pair = device->connect(0, theirs, Deadline::after(10s));
      CompletionSignal signal;
      std::vector<std::byte> chunk(kChunk, std::byte{7});
      std::deque<Request> sends;
      for (int i = 0; i < kMessages; ++i) {
        sends.emplace_back().attach(&signal);
        pair->post_send(sends.back(), {static_cast<uint64_t>(i), 0}, std::span<const std::byte>(chunk));
      }
      std::this_thread::sleep_for(30ms);
      ::kill(::getpid(), SIGKILL);
    } catch (...) {
    }
    ::_exit(4);
  }
  options.rank = 0;
  auto device = create_device(options);
  auto mine = device->address();
  std::vector<std::byte> theirs(mine.size());
  REQUIRE(read_exact(to_parent[0], theirs.data(), theirs.size()));
  REQUIRE(::write(to_child[1], mine.data(), mine.size()) == static_cast<ssize_t>(mine.size()));
  auto pair = device->connect(1, theirs, Deadline::after(10s));
  CompletionSignal signal;
  std::vector<std::byte> chunk(kChunk);
  std::deque<Request> recvs;
  for (int i = 0; i < kMessages; ++i) {
    recvs.emplace_back().attach(&signal);
    pair->post_recv(recvs.back(), {static_cast<uint64_t>(i), 0}, chunk);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  auto died = Clock::now();
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  try {
    for (auto& recv : recvs) recv.wait(Deadline::after(5s), "test: the dead peer went unnoticed");
    FAIL("every message arrived although the sender was killed mid-transfer");
  } catch (const IoError& error) {
    CHECK(error.peer_rank() == 1);
    CHECK_THAT(error.what(), Contains("rank 0: connection to peer rank 1 (127.0.0.1:"));
    CHECK_THAT(error.what(), Contains("closed by the peer"));
  }
  CHECK(seconds_since(died) < 1.0);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
}

}  // namespace
}  // namespace chorus::transport::tcp::testing
