// Transport conformance, hostile input: garbage, foreign and forged
// handshakes on a device's listener are dropped (the connection closed), a
// stranger that says nothing blocks nobody, and the job's real peers still
// connect and exchange messages. Each transport's listener and handshake are
// reached through its hooks (strangers.h); the attacks of the hostile-bytes
// integration test (test/integration/hostile_peer.h) run against it too.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "test/transport/conformance.h"
#include "test/stderr_lines.h"
#include "test/transport/strangers.h"
#include "transport/shm/address.h"
#include "transport/shm/side_channel.h"

namespace chorus::transport::testing {
namespace {

void send_all_ignoring_errors(int fd, const std::vector<uint64_t>& words) {
  [[maybe_unused]] const ssize_t sent = ::send(fd, words.data(), words.size() * sizeof(uint64_t), MSG_NOSIGNAL);
}

// Every rank sends one message to every other and checks what it receives.
void exchange_all(TestMesh& mesh, uint64_t round) {
  Requests requests;
  std::vector<Buffer> outgoing;
  std::vector<std::unique_ptr<ReceiveBuffer>> incoming;
  std::vector<uint64_t> seeds;
  for (int rank = 0; rank < mesh.size(); ++rank)
    for (int peer = 0; peer < mesh.size(); ++peer) {
      if (peer == rank) continue;
      const uint64_t seed = round * 100 + static_cast<uint64_t>(rank * 10 + peer);
      outgoing.push_back(pattern(seed, 5000));
      mesh.pair(rank, peer).post_send(requests.add(), {round, 1}, outgoing.back());
      incoming.push_back(std::make_unique<ReceiveBuffer>(5000));
      seeds.push_back(round * 100 + static_cast<uint64_t>(peer * 10 + rank));
      mesh.pair(rank, peer).post_recv(requests.add(), {round, 1}, incoming.back()->data());
    }
  for (Request& request : requests.all()) wait_ok(request);
  for (size_t i = 0; i < incoming.size(); ++i) CHECK(incoming[i]->holds(seeds[i]));
}

TEST_CASE("transport: garbage, foreign, forged and replayed hellos on the listener are dropped; real peers still "
          "connect",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  const StrangerHooks* hooks = stranger_hooks(transport);
  INFO("test/transport/strangers.cc needs an entry for the transport");
  REQUIRE(hooks);
  constexpr int kRanks = 3;
  const JobSecret secret("the conformance suite's job secret");
  DeviceOptions options;
  options.config.secret = secret;
  TestMesh mesh;
  mesh.devices = make_devices(transport, kRanks, options);
  // Rank 0 is dialed by every other rank.
  const auto address = mesh.device(0).address();
  const auto endpoint = hooks->listener ? hooks->listener(address, 0) : std::nullopt;
  if (!endpoint) {
    WARN(transport << " has no listener a stranger could reach");
    return;
  }
  INFO("listener " << endpoint->text);
  const auto limit = std::chrono::seconds(3);
  std::vector<int> open;

  const int noise = connect_stranger(*endpoint);
  REQUIRE(noise >= 0);
  open.push_back(noise);
  std::mt19937_64 random(42);
  std::vector<uint64_t> words(16);
  for (auto& word : words) word = random();
  REQUIRE(::send(noise, words.data(), words.size() * 8, MSG_NOSIGNAL) == 128);

  // Each stranger below gets every other field right: only its flaw should turn it away.
  auto stranger = [&](Forgery forgery) {
    const int fd = connect_stranger(*endpoint);
    REQUIRE(fd >= 0);
    open.push_back(fd);
    hooks->hello(fd, address, 0, forgery);
    return fd;
  };
  const int wrong_nonce = stranger({.dialer = 1, .right_nonce = false, .secret = secret, .replayed_challenge = {}});
  const int outside_job = stranger({.dialer = 9, .right_nonce = true, .secret = secret, .replayed_challenge = {}});
  const int forged = stranger({.dialer = 1, .right_nonce = true, .secret = JobSecret("a guessed secret"), .replayed_challenge = {}});
  const int no_secret = stranger({.dialer = 2, .right_nonce = true, .secret = JobSecret(), .replayed_challenge = {}});
  // A replay: a hello proven (with the real secret) over the challenge of
  // another connection, as one recorded off the wire would be.
  const int recorded = connect_stranger(*endpoint);
  REQUIRE(recorded >= 0);
  open.push_back(recorded);
  const Challenge old_challenge = hooks->hello(recorded, address, 0, {.dialer = 2, .right_nonce = false,
                                                                      .secret = JobSecret("x"), .replayed_challenge = {}});
  const int replayed = stranger({.dialer = 2, .right_nonce = true, .secret = secret,
                                 .replayed_challenge = old_challenge});

  const int silent = connect_stranger(*endpoint);  // says nothing; must not block anyone
  REQUIRE(silent >= 0);
  open.push_back(silent);

  // The hostile-bytes test's attacks: noise, forged hellos, frames and aborts.
  for (int kind = 0; kind < integration::attack_kinds(); ++kind) {
    const integration::AttackOutcome outcome = integration::attack_once(*endpoint, kind, kRanks, random);
    CHECK(outcome.connected);
    if (outcome.open_fd >= 0) open.push_back(outcome.open_fd);
  }

  connect_mesh(mesh);
  for (auto& device : mesh.devices) mesh.sleepers.push_back(std::make_unique<WaitingScope<Device>>(*device));
  exchange_all(mesh, 1);

  CHECK(closed_by_listener(noise, limit));
  CHECK(closed_by_listener(wrong_nonce, limit));
  CHECK(closed_by_listener(outside_job, limit));
  CHECK(closed_by_listener(forged, limit));
  CHECK(closed_by_listener(no_secret, limit));
  CHECK(closed_by_listener(replayed, limit));

  // A hello for a rank that is already connected is a duplicate, even with the right nonce and secret.
  const int duplicate = stranger({.dialer = 1, .right_nonce = true, .secret = secret, .replayed_challenge = {}});
  CHECK(closed_by_listener(duplicate, limit));

  // None of it disturbed the job.
  exchange_all(mesh, 2);
  for (int rank = 0; rank < kRanks; ++rank) REQUIRE_FALSE(mesh.device(rank).failure());
  for (int fd : open) ::close(fd);
}

TEST_CASE("transport: thousands of garbage connections on the listener cost a few log lines, not one each",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  // The socket listeners; rdma_cm's refusals go through the same RejectionLog.
  if (transport != "tcp" && transport != "shm") return;
  const StrangerHooks* hooks = stranger_hooks(transport);
  REQUIRE(hooks);
  DeviceOptions options;
  options.config.secret = JobSecret("the conformance suite's job secret");
  TestMesh mesh;
  mesh.devices = make_devices(transport, 2, options);
  const auto address = mesh.device(0).address();
  const auto endpoint = hooks->listener(address, 0);
  REQUIRE(endpoint);
  // Issue 45's target: 10,000 connections, < 50 lines per rank (CHORUS_TEST_STRANGERS changes the count).
  const char* strangers_env = std::getenv("CHORUS_TEST_STRANGERS");
  const int kStrangers = strangers_env ? std::max(1, std::atoi(strangers_env)) : 10'000;
  int connected = 0;
  const size_t warnings = chorus::test::stderr_lines_during([&] {
    std::mt19937_64 random(7);
    std::vector<uint64_t> words(4);
    int last = -1;
    for (int i = 0; i < kStrangers; ++i) {
      const int fd = connect_stranger(*endpoint);
      if (fd < 0) {  // the backlog is full: let the listener catch up
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      ++connected;
      for (auto& word : words) word = random();
      send_all_ignoring_errors(fd, words);
      if (last >= 0) ::close(last);
      last = fd;
    }
    // The listener has dropped every earlier one once it drops the last.
    if (last >= 0) {
      CHECK(closed_by_listener(last, std::chrono::seconds(10)));
      ::close(last);
    }
  }, "dropped an incoming");
  CHECK(connected > kStrangers / 2);
  // Each source gets a line per 10 s: here one source, one line (a slow
  // machine that takes over 10 s gets a second), never one per connection.
  std::printf("%s: %d garbage connections (%d accepted), %zu log lines\n", transport.c_str(), kStrangers, connected,
              warnings);
  CHECK(warnings >= 1);
  CHECK(warnings < 10);
  REQUIRE_FALSE(mesh.device(0).failure());
}

// Issue 29, item 2: in a job without a secret the hello's proof shows
// nothing, so the shm listener must tell rank 1 from any other process of
// its user by the pid the kernel reports, before it sends a descriptor.
TEST_CASE("transport: shm sends no descriptor to a dialer whose pid is not the one its rank published",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  if (transport != "shm") return;
  TestMesh mesh;
  mesh.devices = make_devices(transport, 2, DeviceOptions{});  // no secret
  const auto address = mesh.device(0).address();
  // Rank 1 published another process's pid; this test process dials as rank 1.
  shm::ShmAddress published = shm::decode_address(mesh.device(1).address(), -1, 1);
  published.pid = static_cast<uint32_t>(::getppid());
  mesh.device(0).check_peer(1, shm::encode_address(published));
  const auto endpoint = stranger_hooks(transport)->listener(address, 0);
  REQUIRE(endpoint);
  const int fd = connect_stranger(*endpoint);
  REQUIRE(fd >= 0);
  std::vector<std::byte> message;
  std::vector<Fd> fds;
  shm::SideKind kind{};
  Challenge challenge{};
  REQUIRE(shm::wait_readable(fd, Deadline::after(std::chrono::seconds(2))));
  REQUIRE(shm::receive_side(fd, message, fds, 0) > 0);
  REQUIRE(shm::check_side_message(message, kind).empty());
  REQUIRE(shm::decode_challenge(message, challenge).empty());
  // Rank 1's hello in every other respect: the right nonce, ranks and (empty) secret.
  shm::Hello hello;
  hello.listener_nonce = shm::decode_address(address, -1, 0).nonce;
  hello.dialer_rank = 1;
  hello.listener_rank = 0;
  hello.dialer_challenge = fresh_challenge();
  std::vector<std::byte> hello_message = shm::encode_hello(hello);
  shm::sign_side_message(hello_message, JobSecret(), shm::kShmHelloPurpose, {challenge});
  const Fd doorbell(::eventfd(0, EFD_CLOEXEC));
  const int passed = doorbell.get();
  REQUIRE(shm::send_side(fd, hello_message, std::span<const int>(&passed, 1)) == 0);
  // The listener hangs up; nothing, and no descriptor, comes first.
  REQUIRE(shm::wait_readable(fd, Deadline::after(std::chrono::seconds(3))));
  fds.clear();
  CHECK(shm::receive_side(fd, message, fds, 2) <= 0);
  CHECK(fds.empty());
  ::close(fd);
  REQUIRE_FALSE(mesh.device(0).failure());
}

}  // namespace
}  // namespace chorus::transport::testing
