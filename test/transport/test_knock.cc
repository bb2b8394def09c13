// Knocking on a listener (transport/knock.h) and connecting a Mesh on demand
// (transport/mesh.h), per transport: what a rank waiting for a peer's dial
// learns from the peer's listener, and that a Mesh built from routes
// connects exactly the pairs asked for, whichever rank asks first, and
// fails naming a peer that aborted before dialing.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "test/transport/conformance.h"
#include "transport/abort_record.h"
#include "transport/file_descriptor.h"
#include "transport/knock.h"
#include "transport/mesh.h"

using namespace chorus;
using namespace chorus::transport;
using namespace chorus::transport::testing;

namespace {

// An in-memory abort record, as the store-backed one behaves.
class MemoryAbortRecord : public AbortRecord {
 public:
  void post(int rank, const AbortReport& report) override {
    std::lock_guard<std::mutex> lock(mutex_);
    reports_[rank] = encode_abort_report(report);
  }
  std::optional<AbortReport> find(int rank, std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = reports_.find(rank);
    if (found == reports_.end()) return std::nullopt;
    return decode_abort_report(found->second);
  }

 private:
  std::mutex mutex_;
  std::map<int, std::vector<std::byte>> reports_;
};


}  // namespace

TEST_CASE("knock: a listener that speaks is alive, one that closes has aborted, a missing one refuses",
          "[transport][knock]") {
  // Plain sockets first: the classification itself.
  Fd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  REQUIRE(listener.valid());
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string name = cat('\0', "chorus-test-knock-", ::getpid());
  std::memcpy(address.sun_path, name.data(), name.size());
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  const auto* raw = reinterpret_cast<const sockaddr*>(&address);
  REQUIRE(::bind(listener.get(), raw, length) == 0);
  REQUIRE(::listen(listener.get(), 8) == 0);
  // Nobody accepts: the kernel queues the connection, nothing is said.
  CHECK(knock(raw, length, SOCK_SEQPACKET, 100ms) == KnockAnswer::silent);
  {
    Fd queued(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }
  auto accept_then = [&](bool speak) {
    return std::async(std::launch::async, [&, speak] {
      Fd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (speak) {
        const char hello[4] = {'c', 'h', 'l', 'g'};
        [[maybe_unused]] ssize_t n = ::send(accepted.get(), hello, sizeof(hello), MSG_NOSIGNAL);
        char drain[8];
        [[maybe_unused]] ssize_t m = ::recv(accepted.get(), drain, sizeof(drain), 0);  // the knocker's close
      }
    });
  };
  auto speaking = accept_then(true);
  CHECK(knock(raw, length, SOCK_SEQPACKET, 1000ms) == KnockAnswer::alive);
  speaking.get();
  auto closing = accept_then(false);
  CHECK(knock(raw, length, SOCK_SEQPACKET, 1000ms) == KnockAnswer::closed);
  closing.get();
  listener = Fd();
  CHECK(knock(raw, length, SOCK_SEQPACKET, 100ms) == KnockAnswer::refused);

  KnockSchedule schedule;
  CHECK_FALSE(schedule.due(100ms));
  CHECK(schedule.due(250ms));
  CHECK_FALSE(schedule.due(600ms));
  CHECK(schedule.due(760ms));
}

TEST_CASE("knock: every transport's listener says alive, then aborted, then gone", "[transport][knock]") {
  FOR_EACH_TRANSPORT(transport);
  auto devices = make_devices(transport, 2);
  const std::vector<std::byte> address = devices[1]->address();
  devices[0]->check_peer(1, address);
  const KnockAnswer live = devices[0]->knock(1, address);
  if (live == KnockAnswer::unknown) {
    WARN(transport << " cannot knock (a wait for its dial ends at the timeout)");
    return;
  }
  CHECK(live == KnockAnswer::alive);
  devices[1]->abort(std::make_exception_ptr(Aborted("rank 1: stopped by the test")));
  CHECK(devices[0]->knock(1, address) == KnockAnswer::closed);
  devices[1].reset();
  CHECK(devices[0]->knock(1, address) == KnockAnswer::refused);
}

TEST_CASE("mesh on demand: pairs connect when asked, from either side first, and only those",
          "[transport][on-demand]") {
  FOR_EACH_TRANSPORT(transport);
  auto meshes = routed_meshes(make_devices(transport, 4));
  for (int rank = 0; rank < 4; ++rank) {
    CHECK_FALSE(meshes[static_cast<size_t>(rank)]->fully_connected());
    for (int peer = 0; peer < 4; ++peer) CHECK_FALSE(meshes[static_cast<size_t>(rank)]->connected(peer));
  }
  // 0-3 (the lower rank asks first and waits) and 1-2 (the higher first).
  auto zero = std::async(std::launch::async, [&] { meshes[0]->connect(3, Deadline::after(10s)); });
  std::this_thread::sleep_for(100ms);
  meshes[3]->connect(3 - 3, Deadline::after(10s));
  zero.get();
  meshes[2]->connect(1, Deadline::after(10s));  // dials: returns without rank 1
  meshes[1]->connect(2, Deadline::after(10s));
  CHECK(meshes[0]->connected(3));
  CHECK(meshes[3]->connected(0));
  CHECK(meshes[1]->connected(2));
  CHECK(meshes[2]->connected(1));
  CHECK_FALSE(meshes[0]->connected(1));
  CHECK_FALSE(meshes[0]->connected(2));
  CHECK_FALSE(meshes[1]->connected(3));
  // A message over each new pair.
  const Buffer data = pattern(3, 1000);
  ReceiveBuffer incoming(1000);
  Requests requests;
  Request& sent = requests.add();
  Request& received = requests.add();
  // Asleep, as ranks waiting in a call are: the transports' threads move the bytes.
  WaitingScope<Mesh> sender_waits(*meshes[3]);
  WaitingScope<Mesh> receiver_waits(*meshes[0]);
  meshes[3]->pair(0).post_send(sent, {9, 1}, data);
  meshes[0]->pair(3).post_recv(received, {9, 1}, incoming.data());
  wait_ok(received);
  wait_ok(sent);
  CHECK(incoming.holds(3));
}

TEST_CASE("mesh on demand: a rank waiting for a peer that aborted fails with the peer's words",
          "[transport][on-demand]") {
  FOR_EACH_TRANSPORT(transport);
  auto meshes = routed_meshes(make_devices(transport, 2));
  if (meshes[0]->device_of(1).knock(1, meshes[1]->devices().front()->address()) == KnockAnswer::unknown) {
    WARN(transport << " cannot knock: its waits end at the timeout");
    return;
  }
  auto record = std::make_shared<MemoryAbortRecord>();
  meshes[0]->set_abort_record(record);
  meshes[1]->set_abort_record(record);
  const auto start = Clock::now();
  auto waiting = std::async(std::launch::async, [&] { meshes[0]->connect(1, Deadline::after(20s)); });
  std::this_thread::sleep_for(100ms);
  meshes[1]->abort(std::make_exception_ptr(InvalidArgument("rank 1: broadcast root 9 is out of range")));
  REQUIRE_THROWS_AS(waiting.get(), InvalidArgument);
  CHECK(seconds_since(start) < 3);
  REQUIRE(meshes[0]->failed());
  REQUIRE_THROWS_WITH(std::rethrow_exception(meshes[0]->failure()),
                      "rank 0: peer rank 1 aborted: rank 1: broadcast root 9 is out of range");

  // Without an abort record the wait still ends at once, naming the peer.
  auto bare = routed_meshes(make_devices(transport, 2));
  auto bare_wait = std::async(std::launch::async, [&] { bare[0]->connect(1, Deadline::after(20s)); });
  std::this_thread::sleep_for(100ms);
  bare[1]->abort(std::make_exception_ptr(Aborted("rank 1: stopped by the test")));
  REQUIRE_THROWS_AS(bare_wait.get(), Aborted);
  REQUIRE_THROWS_WITH(std::rethrow_exception(bare[0]->failure()),
                      Catch::Contains("rank 0: peer rank 1 aborted before connecting to this rank"));
}
