// Transport conformance, failure paths: mismatched messages, abort (by the
// receiver, the sender, or a bystander), a peer that dies (SIGKILL), stalls
// (SIGSTOP, or never posts) or closes its context (before or after this rank
// posts, with its finished sends still delivered), connections that cannot
// be made, and bad arguments. Each error must be the right class, name the
// ranks involved and arrive promptly: the time limits are generous for a
// loaded machine, but a transport that hangs fails them.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include "base/log.h"
#include "test/transport/conformance.h"

namespace chorus::transport::testing {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

// How long an error that should be prompt may take on a loaded machine.
constexpr double kPromptSeconds = 2.0;

// Waiting for a request nobody completes throws TimeoutError with the
// waiter's words, once the deadline passed and not much later.
void check_times_out(Request& request, std::chrono::milliseconds deadline, const std::string& what) {
  const auto start = Clock::now();
  REQUIRE_THROWS_MATCHES(request.wait(Deadline::after(deadline), what), TimeoutError, Catch::Message(what));
  const double waited = seconds_since(start);
  const double seconds = std::chrono::duration<double>(deadline).count();
  CHECK(waited >= seconds - 0.01);
  CHECK(waited < seconds + kPromptSeconds);
}

TEST_CASE("transport: a length mismatch fails the receiver with MismatchError", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  const bool posted_first = GENERATE(true, false);
  const size_t sent = GENERATE(size_t{100}, size_t{100000});
  INFO((posted_first ? "receive posted before arrival" : "receive posted after arrival") << ", " << sent
                                                                                         << " bytes sent");
  Requests requests;
  TestMesh mesh = make_mesh(transport, 3);
  const auto outgoing = pattern(1, sent);
  ReceiveBuffer incoming(2 * sent);
  Request& send = requests.add();
  Request& recv = requests.add();
  if (posted_first) mesh.pair(1, 0).post_recv(recv, {0x500000001, 4}, incoming.data());
  mesh.pair(0, 1).post_send(send, {0x500000001, 4}, outgoing);
  if (!posted_first) {
    std::this_thread::sleep_for(50ms);
    mesh.pair(1, 0).post_recv(recv, {0x500000001, 4}, incoming.data());
  }
  const std::string text = wait_error<MismatchError>(recv);
  // The same call, only the length differs: the text says just that.
  CHECK_THAT(text, Contains(cat("rank 1: peer rank 0 sent ", sent, " bytes for tag 0x500000001 (")));
  CHECK_THAT(text, Contains(cat(") but this rank expected ", 2 * sent)));
  CHECK(incoming.untouched());
  // The receiver's device is finished: later posts fail at once with the same error.
  Request& later = requests.add();
  mesh.pair(1, 2).post_recv(later, {1, 1}, incoming.data());
  REQUIRE(later.state() == Request::State::failed);
  REQUIRE_THROWS_AS(later.wait(Deadline::after(1ms), "x"), MismatchError);
  // Its peers learn why.
  REQUIRE(failure_within(mesh.device(0), 5s));
  REQUIRE(failure_within(mesh.device(2), 5s));
  try {
    std::rethrow_exception(mesh.device(2).failure());
  } catch (const MismatchError& error) {
    // Directly from rank 1, or relayed by rank 0 if its report came first:
    // either way rank 1 is the peer named, in its own words.
    CHECK_THAT(error.what(), StartsWith("rank 2: peer rank 1 aborted"));
    CHECK_THAT(error.what(), Contains("rank 1: peer rank 0 sent"));
  }
}

TEST_CASE("transport: a signature mismatch names both calls", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  const size_t size = GENERATE(size_t{64}, size_t{100000});
  INFO(size << " bytes");
  DeviceOptions options = default_options();
  options.describe_signature = [](uint64_t signature) { return cat("allreduce #", signature); };
  Requests requests;
  TestMesh mesh = make_mesh(transport, 2, Waiting::asleep, options);
  const auto outgoing = pattern(1, size);
  ReceiveBuffer incoming(size);
  Request& recv = requests.add();
  Request& send = requests.add();
  mesh.pair(0, 1).post_recv(recv, {7, 1}, incoming.data());
  mesh.pair(1, 0).post_send(send, {7, 2}, outgoing);
  const std::string text = wait_error<MismatchError>(recv);
  CHECK_THAT(text, Contains(cat("rank 0: peer rank 1 sent allreduce #2 but this rank expected allreduce #1, for tag ",
                                "0x7 (a message of ", size, " bytes; this rank expected ", size, ")")));
  // Not one byte of the wrong call may land in the buffer.
  REQUIRE(incoming.untouched());
  // The sender learns it too (its send may have finished before: bytes on their way count).
  const auto failure = failure_within(mesh.device(1), 5s);
  REQUIRE(failure);
  REQUIRE_THROWS_AS(std::rethrow_exception(failure), MismatchError);
}

TEST_CASE("transport: abort fails everything here and tells every peer why", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;
  TestMesh mesh = make_mesh(transport, 3);
  ReceiveBuffer a(10), b(10), c(300000);
  Request& waiting_on_0 = requests.add();
  Request& own = requests.add();
  Request& own_send = requests.add();
  const auto big = pattern(1, 300000);
  mesh.pair(1, 0).post_recv(waiting_on_0, {3, 3}, a.data());
  mesh.pair(0, 2).post_recv(own, {3, 3}, b.data());
  mesh.pair(0, 2).post_send(own_send, {4, 4}, big);  // rank 2 never receives it
  const auto start = Clock::now();
  mesh.device(0).abort(std::make_exception_ptr(Aborted("rank 0: stopped by the test")));
  // Synchronous: our own requests are already failed when abort returns.
  REQUIRE(own.state() == Request::State::failed);
  REQUIRE_THROWS_AS(own.wait(Deadline::after(1ms), "x"), Aborted);
  REQUIRE(own_send.finished());
  const std::string text = wait_error<Aborted>(waiting_on_0);
  CHECK(seconds_since(start) < kPromptSeconds);
  // Straight from rank 0, or relayed by rank 2 when its report wins the race (ibverbs on Soft-RoCE did).
  CHECK((text == "rank 1: peer rank 0 aborted: rank 0: stopped by the test" ||
         text == "rank 1: peer rank 0 aborted (relayed by rank 2): rank 0: stopped by the test"));
  CHECK(a.untouched());
  CHECK(b.untouched());
  // Idempotent: the first reason stays.
  mesh.device(0).abort(std::make_exception_ptr(IoError("second")));
  REQUIRE_THROWS_AS(std::rethrow_exception(mesh.device(0).failure()), Aborted);
  Request& later = requests.add();
  mesh.pair(0, 1).post_send(later, {1, 1}, std::span<const std::byte>(big));
  REQUIRE(later.state() == Request::State::failed);
  const auto failure = failure_within(mesh.device(2), 5s);
  REQUIRE(failure);
  // Straight from rank 0, or relayed by rank 1: rank 0 is the peer named either way, in its own words.
  REQUIRE_THROWS_WITH(std::rethrow_exception(failure), StartsWith("rank 2: peer rank 0 aborted"));
  REQUIRE_THROWS_WITH(std::rethrow_exception(failure), EndsWith("): rank 0: stopped by the test") ||
                                                           EndsWith("aborted: rank 0: stopped by the test"));
}

TEST_CASE("transport: after abort returns, no byte lands in the receive buffer", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  check_no_byte_lands_after_abort(transport);
}

TEST_CASE("transport: a sender that aborts mid-transfer fails its receiver promptly, naming it", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  const size_t size = abort_message_bytes();
  const Buffer outgoing = pattern(9, size);
  ReceiveBuffer incoming(size);
  // As for the receiver's abort: an attempt the transfer outran proves nothing.
  // On a loaded machine even an abort right after post_send can be outrun
  // (the receiver's thread copied all 32 MiB of an ASan run first, five times
  // over), so the last attempt holds the receiver still: nobody waits on or
  // polls rank 1 until rank 0 has aborted, and the message is mid-transfer by
  // construction (announced, at most partly moved) for the transports that
  // move bytes only for a waiter or poller (shm, cuda_ipc).
  for (int attempt = 0; attempt <= kAbortAttempts; ++attempt) {
    const bool receiver_held = attempt == kAbortAttempts;
    INFO((receiver_held ? "the receiver held until the abort" : "the receiver running"));
    Requests requests;
    TestMesh mesh = make_mesh(transport, 2, receiver_held ? Waiting::by_test : Waiting::asleep);
    std::optional<WaitingScope<Device>> sender_awake;
    if (receiver_held) sender_awake.emplace(mesh.device(0));
    Request& recv = requests.add();
    Request& send = requests.add();
    mesh.pair(1, 0).post_recv(recv, {1, 1}, incoming.data());
    mesh.pair(0, 1).post_send(send, {1, 1}, outgoing);
    if (!receiver_held) std::this_thread::sleep_for(abort_nap(attempt));
    mesh.device(0).abort(std::make_exception_ptr(Aborted("rank 0: mid-transfer abort")));
    REQUIRE(send.finished());
    // (tcp's reader thread runs whether anyone waits or not, and with TLS its
    // post_send writes the whole message itself: for it this attempt is one
    // more race.)
    std::optional<WaitingScope<Device>> receiver_awake;
    if (receiver_held) receiver_awake.emplace(mesh.device(1));
    const auto aborted = Clock::now();
    try {
      recv.wait(Deadline::after(10s), "test: the receiver never heard of the abort");
      continue;  // it had all arrived
    } catch (const Error& error) {
      CHECK(seconds_since(aborted) < kPromptSeconds);
      CHECK_THAT(error.what(), StartsWith("rank 1: "));
      CHECK_THAT(error.what(), Contains("peer rank 0"));
    }
    return;
  }
  FAIL("the " + std::to_string(size >> 20) + " MiB transfer finished before the abort in every attempt");
}

TEST_CASE("transport: a peer that closes its context fails the waiter quickly, naming it", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  const bool polling = GENERATE(false, true);
  INFO((polling ? "the waiter polls" : "the waiter sleeps"));
  Requests requests;
  TestMesh mesh = make_mesh(transport, 2, polling ? Waiting::by_test : Waiting::asleep);
  ReceiveBuffer incoming(10);
  Request& recv = requests.add();
  std::optional<PollingScope<Device>> scope;
  if (polling) scope.emplace(mesh.device(1));
  mesh.pair(1, 0).post_recv(recv, {3, 3}, incoming.data());
  const auto start = Clock::now();
  std::thread closer([&] {
    std::this_thread::sleep_for(20ms);
    mesh.destroy(0);
  });
  std::string text;
  if (polling) {
    const bool finished = poll_until_finished(mesh.device(1), recv, 10s);
    closer.join();
    REQUIRE(finished);
    text = wait_error<IoError>(recv, 1ms);
  } else {
    text = wait_error<IoError>(recv);
    closer.join();
  }
  CHECK(seconds_since(start) < kPromptSeconds);
  CHECK_THAT(text, Contains("rank 1: peer rank 0 closed its context"));
  try {
    std::rethrow_exception(recv.error());
  } catch (const IoError& error) {
    CHECK(error.peer_rank() == 0);
  }
  // Later operations fail at once.
  Request& later = requests.add();
  const std::vector<std::byte> outgoing(10);
  mesh.pair(1, 0).post_send(later, {4, 4}, outgoing);
  REQUIRE(later.state() == Request::State::failed);
}

TEST_CASE("transport: a message whose send finished arrives though its sender closed right after",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  const size_t size = GENERATE(size_t{0}, size_t{100}, size_t{65535}, size_t{100000}, (size_t{1} << 20) + 1);
  INFO(size << " bytes");
  Requests requests;
  TestMesh mesh = make_mesh(transport, 2);
  const Buffer outgoing = pattern(8, size);
  Request& send = requests.add();
  mesh.pair(0, 1).post_send(send, {6, 6}, outgoing);
  // A finished send hands the buffer back: the bytes are on their way. A
  // transport whose large sends wait for the receive (shm's single-copy
  // pulls) has nothing to show here for that size.
  const auto until = Clock::now() + 500ms;
  while (!send.finished() && Clock::now() < until) std::this_thread::sleep_for(1ms);
  const bool sent_first = send.finished();
  if (sent_first) {
    REQUIRE(send.state() == Request::State::done);
    mesh.destroy(0);
    std::this_thread::sleep_for(50ms);
  }
  ReceiveBuffer incoming(size);
  Request& recv = requests.add();
  mesh.pair(1, 0).post_recv(recv, {6, 6}, incoming.data());
  wait_ok(recv);
  REQUIRE(incoming.holds(8));
  if (!sent_first) wait_ok(send);
}

TEST_CASE("transport: posts to a peer that already closed its context fail at once, naming it", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  const bool receive = GENERATE(true, false);
  INFO((receive ? "a receive" : "a send") << " posted after the peer closed");
  Requests requests;
  TestMesh mesh = make_mesh(transport, 2);
  mesh.destroy(0);  // nothing pending: an orderly goodbye
  std::this_thread::sleep_for(100ms);
  ReceiveBuffer incoming(100000);
  const Buffer outgoing = pattern(1, 100000);
  Request& request = requests.add();
  const auto start = Clock::now();
  if (receive) mesh.pair(1, 0).post_recv(request, {3, 3}, incoming.data());
  else mesh.pair(1, 0).post_send(request, {3, 3}, outgoing);
  const std::string text = wait_error<IoError>(request);
  CHECK(seconds_since(start) < kPromptSeconds);
  CHECK_THAT(text, Contains("rank 1: peer rank 0 closed its context"));
  try {
    std::rethrow_exception(request.error());
  } catch (const IoError& error) {
    CHECK(error.peer_rank() == 0);
  }
}

TEST_CASE("transport: a peer's orderly close fails nothing else: the other ranks keep talking", "[transport]") {
  // ibverbs once failed the whole device here: the device flushed the
  // receives still posted for the departed peer, and when those flushes were
  // polled before the disconnect event they read as a broken link.
  FOR_EACH_TRANSPORT(transport);
  Requests requests;
  TestMesh mesh = make_mesh(transport, 3);
  mesh.destroy(0);
  // Long enough for every goodbye, disconnect and flush to land.
  std::this_thread::sleep_for(200ms);
  for (uint64_t round = 0; round < 3; ++round) {
    const Buffer outgoing = pattern(round + 1, 100000);
    ReceiveBuffer incoming(outgoing.size());
    Request& send = requests.add();
    Request& recv = requests.add();
    mesh.pair(2, 1).post_recv(recv, {9, round}, incoming.data());
    mesh.pair(1, 2).post_send(send, {9, round}, outgoing);
    wait_ok(send);
    wait_ok(recv);
    REQUIRE(incoming.holds(round + 1));
  }
  Request& late = requests.add();
  const std::vector<std::byte> bytes(10);
  mesh.pair(1, 0).post_send(late, {4, 4}, bytes);
  const std::string text = wait_error<IoError>(late);
  CHECK_THAT(text, Contains("rank 1: peer rank 0 closed its context"));
}

TEST_CASE("transport: a peer killed with SIGKILL mid-transfer is detected promptly", "[transport][fork]") {
  FOR_EACH_TRANSPORT(transport);
  constexpr size_t kChunk = size_t{64} << 20;
  constexpr int kMessages = 16;
  // Rank 1 starts streaming 1 GiB to rank 0, then dies without a word.
  ForkedPeer peer(transport, [](Device& device, Pair& pair, int) {
    WaitingScope<Device> asleep(device);
    Requests requests;
    std::vector<std::byte> chunk(kChunk, std::byte{7});
    for (int i = 0; i < kMessages; ++i) pair.post_send(requests.add(), {static_cast<uint64_t>(i), 0}, chunk);
    std::this_thread::sleep_for(30ms);
    ::kill(::getpid(), SIGKILL);
    return 1;
  });
  WaitingScope<Device> asleep(peer.device());
  Requests requests;
  std::vector<std::byte> chunk(kChunk);
  std::vector<Request*> recvs;
  // One more than rank 1 sends: at least that one is pending when it dies.
  for (int i = 0; i <= kMessages; ++i) {
    recvs.push_back(&requests.add());
    peer.pair().post_recv(*recvs.back(), {static_cast<uint64_t>(i), 0}, chunk);
  }
  const int status = peer.reap();
  const auto died = Clock::now();
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  try {
    for (Request* recv : recvs) recv->wait(Deadline::after(10s), "test: the dead peer went unnoticed");
    FAIL("every receive finished although the sender was killed");
  } catch (const IoError& error) {
    CHECK(error.peer_rank() == 1);
    CHECK_THAT(error.what(), StartsWith("rank 0: "));
    CHECK_THAT(error.what(), Contains("peer rank 1"));
  }
  CHECK(seconds_since(died) < kPromptSeconds);
  REQUIRE(peer.device().failure());
  // The device fails the other receives on its own thread, soon after; they
  // must outlive that (the caller keeps a request until it finishes).
  for (Request* recv : recvs) {
    try {
      recv->wait(Deadline::after(10s), "test: a receive outlived the failed device");
    } catch (const IoError&) {
    } catch (const Aborted&) {
    }
  }
}

TEST_CASE("transport: waiting for a peer that never posts times out within the deadline", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;
  TestMesh mesh = make_mesh(transport, 2);
  ReceiveBuffer incoming(100000);
  Request& recv = requests.add();
  mesh.pair(1, 0).post_recv(recv, {5, 5}, incoming.data());
  check_times_out(recv, 300ms, "rank 1: timed out after 0.3 s waiting for tag 0x5 from rank 0");
  // A timeout is the waiter's business: the pair still works.
  REQUIRE_FALSE(mesh.device(1).failure());
  const auto outgoing = pattern(5, 100000);
  mesh.pair(0, 1).post_send(requests.add(), {5, 5}, outgoing);
  wait_ok(recv);
  REQUIRE(incoming.holds(5));
}

TEST_CASE("transport: a stopped peer (SIGSTOP) times the waiter out, and the pair works once it resumes",
          "[transport][fork]") {
  FOR_EACH_TRANSPORT(transport);
  constexpr size_t kSize = (size_t{1} << 20) + 1;
  // Rank 1 says it is ready, waits for the parent's word, then sends.
  ForkedPeer peer(transport, [](Device& device, Pair& pair, int from_parent) {
    WaitingScope<Device> asleep(device);
    Requests requests;
    const auto ready = pattern(1, 16), payload = pattern(2, kSize);
    Request& hello = requests.add();
    pair.post_send(hello, {1, 1}, ready);
    char go = 0;
    if (::read(from_parent, &go, 1) != 1) return 2;
    Request& send = requests.add();
    pair.post_send(send, {2, 1}, payload);
    try {
      wait_ok(hello);
      wait_ok(send);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "forked rank 1: %s\n", error.what());
      return 3;
    }
    return 0;
  });
  WaitingScope<Device> asleep(peer.device());
  Requests requests;
  ReceiveBuffer ready(16), incoming(kSize);
  Request& hello = requests.add();
  peer.pair().post_recv(hello, {1, 1}, ready.data());
  wait_ok(hello);
  REQUIRE(ready.holds(1));
  REQUIRE(::kill(peer.pid(), SIGSTOP) == 0);
  int status = 0;
  REQUIRE(::waitpid(peer.pid(), &status, WUNTRACED) == peer.pid());
  REQUIRE(WIFSTOPPED(status));
  Request& recv = requests.add();
  peer.pair().post_recv(recv, {2, 1}, incoming.data());
  peer.signal_child();  // read only once it runs again
  check_times_out(recv, 500ms, "rank 0: timed out after 0.5 s waiting for tag 0x2 from the stopped rank 1");
  REQUIRE(::kill(peer.pid(), SIGCONT) == 0);
  wait_ok(recv);
  CHECK(incoming.holds(2));
  status = peer.reap();
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE_FALSE(peer.device().failure());
}

TEST_CASE("transport: connecting to a dead address or a peer that never dials gives up at the deadline",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  auto dead = make_devices(transport, 2);
  const auto dead_address = dead[0]->address();
  const auto silent_peer_address = dead[1]->address();
  dead[0].reset();  // nothing listens there any more

  DeviceOptions options = default_options();
  options.rank = 1;
  options.size = 2;
  auto dialer = create_device(transport, options);
  auto start = Clock::now();
  try {
    dialer->connect(0, dead_address, Deadline::after(400ms));
    FAIL("connect to a dead address succeeded");
  } catch (const TimeoutError& error) {
    CHECK_THAT(error.what(), StartsWith("rank 1: "));
    CHECK_THAT(error.what(), Contains("peer rank 0"));
  } catch (const IoError& error) {
    CHECK(error.peer_rank() == 0);
  }
  CHECK(seconds_since(start) < 0.4 + kPromptSeconds);

  // The rank that waits to be dialed, by a dialer that never comes.
  options.rank = 0;
  auto waiter = create_device(transport, options);
  start = Clock::now();
  try {
    waiter->connect(1, silent_peer_address, Deadline::after(300ms));
    FAIL("connect without a dialer succeeded");
  } catch (const TimeoutError& error) {
    CHECK_THAT(error.what(), StartsWith("rank 0: "));
    CHECK_THAT(error.what(), Contains("waiting for peer rank 1"));
  }
  const double waited = seconds_since(start);
  CHECK(waited >= 0.29);
  CHECK(waited < 0.3 + kPromptSeconds);
}

TEST_CASE("transport: bad ranks and addresses are InvalidArgument", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  DeviceOptions options = default_options();
  options.size = 2;
  options.rank = 2;
  REQUIRE_THROWS_AS(create_device(transport, options), InvalidArgument);
  options.rank = -1;
  REQUIRE_THROWS_AS(create_device(transport, options), InvalidArgument);
  options.rank = 0;
  auto device = create_device(transport, options);
  const std::vector<std::byte> junk(48, std::byte{1});
  REQUIRE_THROWS_AS(device->check_peer(1, junk), InvalidArgument);
  REQUIRE_THROWS_AS(device->connect(1, junk, Deadline::after(100ms)), InvalidArgument);
  REQUIRE_THROWS_AS(device->connect(1, {}, Deadline::after(100ms)), InvalidArgument);
  // Itself, and a rank outside the job.
  REQUIRE_THROWS_AS(device->connect(0, device->address(), Deadline::after(100ms)), InvalidArgument);
  REQUIRE_THROWS_AS(device->connect(2, device->address(), Deadline::after(100ms)), InvalidArgument);
  REQUIRE_FALSE(device->failure());
}


TEST_CASE("transport: messages nobody receives are buffered up to the limit, then fail the receiver naming the peer",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  DeviceOptions options = default_options();
  options.config.max_unexpected_bytes = 100000;
  Requests requests;  // outlives the mesh: the sends are never waited on
  TestMesh mesh = make_mesh(transport, 2, Waiting::asleep, options);
  // Eager sends (point to point), which every transport buffers at the
  // receiver: a transport that makes other sends wait for their receive
  // past a window (shm's pulls, docs/shm.md) never does so with these.
  const auto outgoing = pattern(3, 40000);
  const auto eager = [](uint64_t value) { return Tag{.value = value, .signature = 4, .group = 0, .eager = true}; };
  // Two fit; received, they free the room for two more.
  for (uint64_t round = 0; round < 2; ++round) {
    for (uint64_t i = 0; i < 2; ++i) mesh.pair(0, 1).post_send(requests.add(), eager(0x700 + i), outgoing);
    std::this_thread::sleep_for(50ms);
    for (uint64_t i = 0; i < 2; ++i) {
      ReceiveBuffer incoming(40000);
      Request& recv = requests.add();
      mesh.pair(1, 0).post_recv(recv, {0x700 + i, 4}, incoming.data());
      wait_ok(recv);
      CHECK(incoming.holds(3));
    }
  }
  REQUIRE_FALSE(mesh.device(1).failure());
  // Three do not.
  for (uint64_t i = 0; i < 3; ++i) mesh.pair(0, 1).post_send(requests.add(), eager(0x800 + i), outgoing);
  REQUIRE(failure_within(mesh.device(1), 5s));
  try {
    std::rethrow_exception(mesh.device(1).failure());
  } catch (const IoError& error) {
    CHECK_THAT(error.what(), StartsWith("rank 1: ") && Contains("peer rank 0"));
    CHECK_THAT(error.what(), Contains("100000 bytes (CHORUS_MAX_UNEXPECTED_BYTES)"));
    CHECK(error.peer_rank() == 0);
  }
}

}  // namespace
}  // namespace chorus::transport::testing

namespace chorus::transport::testing {
namespace {

TEST_CASE("transport: a live peer answers liveness probes, a closed one does not", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  TestMesh mesh = make_mesh(transport, 3);
  // Rank 1 is busy with nothing of ours: its progress answers all the same.
  for (uint64_t probe = 1; probe <= 3; ++probe) {
    mesh.pair(0, 1).send_liveness_probe(probe, 0);
    mesh.pair(2, 1).send_liveness_probe(probe, 0);
    const auto give_up = Clock::now() + 2s;
    while (!(mesh.pair(0, 1).liveness_answered(probe) && mesh.pair(2, 1).liveness_answered(probe)) &&
           Clock::now() < give_up)
      std::this_thread::sleep_for(1ms);
    CHECK(mesh.pair(0, 1).liveness_answered(probe));
    CHECK(mesh.pair(2, 1).liveness_answered(probe));
  }
  CHECK_FALSE(mesh.pair(0, 2).liveness_answered(1));  // never asked
  mesh.destroy(2);
  mesh.pair(0, 2).send_liveness_probe(4, 0);
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(mesh.pair(0, 2).liveness_answered(4));
}

}  // namespace
}  // namespace chorus::transport::testing
