// TcpStore and TcpStoreServer beyond the common interface: servers that die,
// restart or start late, hostile bytes, parked waits, limits and errors.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <optional>
#include <cstring>
#include <random>
#include <thread>

#include "base/error.h"
#include "rendezvous/store.h"
#include "rendezvous/store_url.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous_test_helpers.h"
#include "test/stderr_lines.h"

using namespace std::chrono_literals;
using chorus::test::bytes;
using chorus::test::text;

namespace {

enum class Authenticate { yes, no };

// A raw client socket to send arbitrary bytes to a server. It reads the
// server's challenge and, unless told not to, proves `secret` over it, so
// what it sends next reaches the request parser.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port, Authenticate authenticate = Authenticate::yes,
                         const chorus::JobSecret& secret = {}) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    timeval two_seconds{2, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &two_seconds, sizeof(two_seconds));
    const std::vector<std::byte> greeting = receive(chorus::tcp_store::kServerChallengeBytes);
    REQUIRE(chorus::tcp_store::decode_server_challenge(greeting, challenge_).empty());
    if (authenticate == Authenticate::no) return;
    const auto proof = chorus::tcp_store::encode_client_proof(challenge_, chorus::fresh_challenge(), secret);
    send(proof);
    const std::vector<std::byte> answer = receive(chorus::tcp_store::kServerProofBytes);
    REQUIRE(chorus::tcp_store::check_server_proof(answer, challenge_, proof, secret).empty());
  }
  const chorus::Challenge& challenge() const { return challenge_; }
  ~RawConnection() { ::close(fd_); }
  void send(const std::vector<std::byte>& data) {
    // The server may already have hung up halfway through: that is the point of some tests.
    (void)::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
  }
  // True once the server has closed this connection (EOF or reset), false on silence.
  bool closed_by_server() {
    char buffer[4096];
    while (true) {
      ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }
  // Ends our side, for noise the server may take as the start of a long frame.
  void finish_sending() { ::shutdown(fd_, SHUT_WR); }
  std::vector<std::byte> receive(size_t count) {
    std::vector<std::byte> data(count);
    size_t done = 0;
    while (done < count) {
      ssize_t n = ::recv(fd_, data.data() + done, count - done, 0);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    data.resize(done);
    return data;
  }

 private:
  int fd_ = -1;
  chorus::Challenge challenge_{};
};

std::vector<std::byte> concat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A port that was free a moment ago.
uint16_t free_port() {
  chorus::TcpStoreServer probe("127.0.0.1", 0);
  return probe.port();
}

// Runs a TcpStoreServer in a child process; returns its pid and port.
std::pair<pid_t, uint16_t> server_process(uint16_t port = 0) {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  pid_t pid = chorus::test::fork_child([&] {
    chorus::TcpStoreServer server("127.0.0.1", port);
    uint16_t bound = server.port();
    (void)!::write(pipe_fds[1], &bound, sizeof(bound));
    while (true) ::pause();
  });
  ::close(pipe_fds[1]);
  uint16_t bound = 0;
  REQUIRE(::read(pipe_fds[0], &bound, sizeof(bound)) == sizeof(bound));
  ::close(pipe_fds[0]);
  return {pid, bound};
}

}  // namespace

TEST_CASE("TcpStoreServer reports its ephemeral port and refuses a port in use", "[tcp_store]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  REQUIRE(server.port() != 0);
  std::string port = std::to_string(server.port());
  std::string message =
      chorus::test::thrown_message<chorus::IoError>([&] { chorus::TcpStoreServer("127.0.0.1", server.port()); });
  REQUIRE_THAT(message, Catch::Contains("port " + port) && Catch::Contains("in use"));
  REQUIRE_THROWS_AS(chorus::TcpStoreServer("no-such-host.invalid", 0), chorus::IoError);
}

TEST_CASE("TcpStore fails within connect_timeout when no server listens, naming host:port", "[tcp_store]") {
  uint16_t port = free_port();
  chorus::test::Stopwatch watch;
  std::string message =
      chorus::test::thrown_message<chorus::IoError>([&] { chorus::TcpStore("127.0.0.1", port, 200ms); });
  REQUIRE_THAT(message, Catch::Contains("127.0.0.1:" + std::to_string(port)));
  REQUIRE(watch.elapsed() >= 200ms);
  REQUIRE(watch.elapsed() < 1500ms);
}

TEST_CASE("TcpStore waits for a server that starts after the client", "[tcp_store]") {
  uint16_t port = free_port();
  std::unique_ptr<chorus::TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(200ms);
    server = std::make_unique<chorus::TcpStoreServer>("127.0.0.1", port);
  });
  chorus::TcpStore store("127.0.0.1", port, 5s);
  starter.join();
  store.set("k", bytes("v"));
  REQUIRE(text(store.get("k", 1s)) == "v");
}

TEST_CASE("TcpStore wait fails within its timeout when the server is destroyed mid-wait", "[tcp_store]") {
  auto server = std::make_unique<chorus::TcpStoreServer>("127.0.0.1", 0);
  std::string address = "127.0.0.1:" + std::to_string(server->port());
  chorus::TcpStore store("127.0.0.1", server->port(), 1s);
  std::thread killer([&] {
    std::this_thread::sleep_for(100ms);
    server.reset();
  });
  chorus::test::Stopwatch watch;
  try {
    store.wait({"never"}, 800ms);
    FAIL("wait returned although the server is gone");
  } catch (const chorus::IoError& error) {
    REQUIRE_THAT(error.what(), Catch::Contains(address));
  } catch (const chorus::TimeoutError& error) {
    REQUIRE_THAT(error.what(), Catch::Contains(address));
  }
  REQUIRE(watch.elapsed() < 1500ms);
  killer.join();
}

TEST_CASE("TcpStore get fails within its timeout when the server process is SIGKILLed", "[tcp_store]") {
  auto [pid, port] = server_process();
  chorus::TcpStore store("127.0.0.1", port, 1s);
  store.set("before", bytes("ok"));
  std::thread killer([pid = pid] {
    std::this_thread::sleep_for(100ms);
    ::kill(pid, SIGKILL);
  });
  chorus::test::Stopwatch watch;
  std::string message = chorus::test::thrown_message<chorus::IoError>([&] { store.get("never", 700ms); });
  REQUIRE_THAT(message, Catch::Contains("127.0.0.1:" + std::to_string(port)));
  REQUIRE(watch.elapsed() < 1500ms);
  killer.join();
  chorus::test::wait_child(pid);
  // Later calls fail too, within connect_timeout (set has no timeout of its own).
  watch = chorus::test::Stopwatch();
  REQUIRE_THROWS_AS(store.set("after", bytes("x")), chorus::IoError);
  REQUIRE(watch.elapsed() < 2500ms);
}

TEST_CASE("TcpStore reconnects to a server restarted on the same port", "[tcp_store]") {
  auto server = std::make_unique<chorus::TcpStoreServer>("127.0.0.1", 0);
  uint16_t port = server->port();
  chorus::TcpStore store("127.0.0.1", port, 3s);
  store.set("first", bytes("1"));
  REQUIRE(store.add("count", 1) == 1);

  SECTION("between calls, add included (the dead idle connection is noticed before sending)") {
    server.reset();
    server = std::make_unique<chorus::TcpStoreServer>("127.0.0.1", port);
    store.set("second", bytes("2"));
    REQUIRE(text(store.get("second", 1s)) == "2");
    REQUIRE(store.add("count", 1) == 1);  // a new server starts empty
    REQUIRE_THROWS_AS(store.get("first", 50ms), chorus::TimeoutError);
  }
  SECTION("during a wait, which is sent again to the new server") {
    std::thread restarter([&] {
      std::this_thread::sleep_for(100ms);
      server.reset();
      std::this_thread::sleep_for(100ms);
      server = std::make_unique<chorus::TcpStoreServer>("127.0.0.1", port);
      chorus::TcpStore other("127.0.0.1", port, 3s);
      std::this_thread::sleep_for(100ms);
      other.set("awaited", bytes("made it"));
    });
    REQUIRE(text(store.get("awaited", 5s)) == "made it");
    restarter.join();
  }
}

TEST_CASE("TcpStoreServer drops connections that send hostile bytes and keeps serving", "[tcp_store]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  chorus::TcpStore store("127.0.0.1", server.port(), 2s);
  store.set("stable", bytes("still here"));
  // A legitimate client parked across all of it must still be answered.
  std::thread parked([&] { REQUIRE(text(store.get("after-attack", 10s)) == "finally"); });

  using chorus::tcp_store::put_u32;
  using chorus::tcp_store::put_u64;
  std::vector<std::vector<std::byte>> attacks;
  attacks.push_back(bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  {
    std::vector<std::byte> frame;
    put_u32(frame, chorus::tcp_store::kMagic);
    frame.push_back(std::byte{99});  // unknown op
    attacks.push_back(frame);
  }
  {
    std::vector<std::byte> frame;  // key longer than 4 KiB
    put_u32(frame, chorus::tcp_store::kMagic);
    frame.push_back(std::byte{1});
    put_u32(frame, 1);
    put_u32(frame, 0xFFFFFFFF);
    attacks.push_back(frame);
  }
  {
    std::vector<std::byte> frame;  // value of 2^62 bytes
    put_u32(frame, chorus::tcp_store::kMagic);
    frame.push_back(std::byte{1});
    put_u32(frame, 1);
    put_u32(frame, 1);
    frame.push_back(std::byte{'k'});
    put_u64(frame, uint64_t{1} << 62);
    attacks.push_back(frame);
  }
  {
    std::vector<std::byte> frame;  // four billion keys
    put_u32(frame, chorus::tcp_store::kMagic);
    frame.push_back(std::byte{2});
    put_u32(frame, 0xFFFFFFFF);
    attacks.push_back(frame);
  }
  {
    // A second request while the first is parked.
    auto wait = chorus::tcp_store::encode_request(chorus::tcp_store::Op::wait, {"nothing"}, {});
    attacks.push_back(concat(wait, chorus::tcp_store::encode_request(chorus::tcp_store::Op::set, {"x"}, bytes("y"))));
  }
  std::mt19937 random(7);
  for (int i = 0; i < 20; ++i) {
    std::vector<std::byte> noise(1 + random() % 2000);
    for (auto& b : noise) b = static_cast<std::byte>(random());
    attacks.push_back(noise);
  }
  for (const auto& attack : attacks) {
    RawConnection raw(server.port());
    raw.send(attack);
    REQUIRE(raw.closed_by_server());
    REQUIRE(text(store.get("stable", 1s)) == "still here");
  }
  for (int i = 0; i < 200; ++i) {
    // Valid magic, then noise: whatever it parses as, the server must survive it.
    std::vector<std::byte> noise;
    put_u32(noise, chorus::tcp_store::kMagic);
    noise.push_back(static_cast<std::byte>(1 + random() % 6));
    for (size_t n = random() % 40; n > 0; --n) noise.push_back(static_cast<std::byte>(random() % 4 ? random() % 8 : random()));
    RawConnection raw(server.port());
    raw.send(noise);
    raw.finish_sending();
    REQUIRE(raw.closed_by_server());
  }
  REQUIRE(text(store.get("stable", 1s)) == "still here");
  {
    // Half a frame, then the attacker vanishes.
    RawConnection raw(server.port());
    auto frame = chorus::tcp_store::encode_request(chorus::tcp_store::Op::set, {"half"}, bytes("value"));
    frame.resize(frame.size() / 2);
    raw.send(frame);
  }
  {
    // A parked wait whose client disappears must not break a later set of the key.
    RawConnection raw(server.port());
    raw.send(chorus::tcp_store::encode_request(chorus::tcp_store::Op::wait, {"after-attack"}, {}));
    std::this_thread::sleep_for(20ms);
  }
  store.set("after-attack", bytes("finally"));
  parked.join();
  REQUIRE_THROWS_AS(store.get("half", 20ms), chorus::TimeoutError);
}

TEST_CASE("TcpStoreServer carries out what a client sent before it closed, however late it reads", "[tcp_store]") {
  // Sent and half-closed at once, the request and the FIN often reach the
  // server in one read: the request must still count, and garbage sent that
  // way must still be refused as garbage (a warning, not a quiet close).
  chorus::TcpStoreServer server("127.0.0.1", 0);
  chorus::TcpStore store("127.0.0.1", server.port(), 2s);
  constexpr int kClients = 200;
  for (int i = 0; i < kClients; ++i) {
    RawConnection raw(server.port());
    const std::string key = "half-closed-" + std::to_string(i);
    std::vector<std::byte> request = chorus::tcp_store::encode_request(chorus::tcp_store::Op::set, {key}, bytes("sent"));
    raw.send(request);
    raw.finish_sending();
    REQUIRE(raw.closed_by_server());
    INFO("client " << i);
    REQUIRE(text(store.get(key, 2s)) == "sent");
  }
  const size_t lines = chorus::test::stderr_lines_during([&] {
    RawConnection raw(server.port(), Authenticate::no);
    raw.send(bytes("GET / HTTP/1.1\r\n\r\n"));
    raw.finish_sending();
    REQUIRE(raw.closed_by_server());
  }, "not a chorus store client");
  CHECK(lines == 1);
}

TEST_CASE("TcpStoreServer: 10,000 garbage connections cost a few log lines and no wrong answer", "[tcp_store]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  chorus::TcpStore store("127.0.0.1", server.port(), 2s);
  store.set("stable", bytes("still here"));
  const std::vector<std::byte> garbage = bytes("GET / HTTP/1.1\r\n\r\n");
  constexpr int kStrangers = 10'000;
  int connected = 0;
  const size_t lines = chorus::test::stderr_lines_during([&] {
    for (int i = 0; i < kStrangers; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      address.sin_port = htons(server.port());
      if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
        ++connected;
        [[maybe_unused]] ssize_t sent = ::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
        // Every tenth stranger waits for the server to read its bytes and
        // drop it, so that some garbage is refused as garbage (a line or a
        // count); the others close at once, and a client that resets before
        // its bytes are read is not a rejection (debug only). Closing all at
        // once left a slow server (ASan) nothing but resets: 0 lines. Until
        // stop 71 a slow server also read the waiting ones' garbage and FIN
        // in one go and closed them quietly (the test above).
        if (i % 10 == 0) {
          ::shutdown(fd, SHUT_WR);
          pollfd waiting{fd, POLLIN, 0};
          char sink[256];
          while (::poll(&waiting, 1, 5000) == 1 && ::recv(fd, sink, sizeof(sink), 0) > 0) {
          }
        }
      }
      ::close(fd);
      if (i % 1000 == 999) CHECK(text(store.get("stable", 5s)) == "still here");
    }
    // The last ones are dropped by the time a request sent after them is answered.
    store.set("after", bytes("the flood"));
    CHECK(text(store.get("after", 5s)) == "the flood");
  }, "TcpStoreServer");
  std::printf("store: %d garbage connections (%d connected), %zu log lines\n", kStrangers, connected, lines);
  CHECK(connected > kStrangers / 2);
  CHECK(lines >= 1);
  CHECK(lines < 50);
}

TEST_CASE("TcpStoreServer answers a multi-key get with one reply", "[tcp_store]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  chorus::TcpStore store("127.0.0.1", server.port(), 2s);
  store.set("a", bytes("A"));
  store.set("b", {});
  store.set("c", bytes("CCC"));
  RawConnection raw(server.port());
  raw.send(chorus::tcp_store::encode_request(chorus::tcp_store::Op::get, {"c", "b", "a"}, {}));
  // magic, status ok, 3 items: (3,"CCC"), (0,""), (1,"A")
  auto reply = raw.receive(9 + 8 + 3 + 8 + 8 + 1);
  std::vector<std::byte> expected;
  chorus::tcp_store::append_reply(expected, chorus::tcp_store::Status::ok,
                                  {bytes("CCC"), std::vector<std::byte>{}, bytes("A")});
  REQUIRE(reply == expected);
}

TEST_CASE("TcpStore get_many of many keys parks until the last one is set", "[tcp_store]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  chorus::TcpStore store("127.0.0.1", server.port(), 2s);
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; ++i) keys.push_back("key/" + std::to_string(i));
  std::thread setter([&] {
    chorus::TcpStore writer("127.0.0.1", server.port(), 2s);
    for (int i = 999; i >= 0; --i) writer.set(keys[i], bytes(std::to_string(i * 3)));
  });
  auto values = store.get_many(keys, 10s);
  setter.join();
  REQUIRE(values.size() == 1000);
  for (int i = 0; i < 1000; ++i) REQUIRE(text(values[i]) == std::to_string(i * 3));
}

TEST_CASE("TcpStore carries large binary values and rejects oversized input", "[tcp_store]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  chorus::TcpStore store("127.0.0.1", server.port(), 2s);
  std::vector<std::byte> large((size_t{8} << 20) + 3);
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<std::byte>((i * 2654435761u) >> 24);
  store.set("large", large);
  REQUIRE(store.get("large", 5s) == large);
  REQUIRE_THROWS_AS(store.set(std::string(5000, 'k'), bytes("v")), chorus::InvalidArgument);
  std::vector<std::byte> too_large(chorus::tcp_store::kMaxValueBytes + 1);
  REQUIRE_THROWS_AS(store.set("too-large", too_large), chorus::InvalidArgument);
  store.set("small", bytes("fine"));
  REQUIRE(text(store.get("small", 1s)) == "fine");
}

TEST_CASE("TcpStore add is exact under concurrent processes", "[tcp_store]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  uint16_t port = server.port();
  std::vector<pid_t> children;
  for (int p = 0; p < 4; ++p) {
    children.push_back(chorus::test::fork_child([port] {
      chorus::TcpStore store("127.0.0.1", port, 5s);
      for (int i = 0; i < 100; ++i) store.add("counter", 1);
    }));
  }
  for (pid_t child : children) REQUIRE(chorus::test::wait_child(child) == 0);
  chorus::TcpStore store("127.0.0.1", port, 2s);
  REQUIRE(store.add("counter", 0) == 400);
}

TEST_CASE("TcpStoreServer with a job secret admits only clients that prove it", "[tcp_store][auth]") {
  const chorus::JobSecret secret("a job secret of thirty-two bytes");
  chorus::TcpStoreServerOptions options;
  options.host = "127.0.0.1";
  options.secret = secret;
  chorus::TcpStoreServer server(options);
  chorus::TcpStore store("127.0.0.1", server.port(), 2s, secret);
  store.set("address/0", bytes("the real one"));

  SECTION("clients with another secret or none fail at once, naming the cause") {
    chorus::test::Stopwatch watch;
    std::string wrong = chorus::test::thrown_message<chorus::IoError>(
        [&] { chorus::TcpStore("127.0.0.1", server.port(), 5s, chorus::JobSecret("another secret, same length!!!!!")); });
    REQUIRE_THAT(wrong, Catch::Contains("CHORUS_SECRET"));
    std::string none = chorus::test::thrown_message<chorus::IoError>(
        [&] { chorus::TcpStore("127.0.0.1", server.port(), 5s); });
    REQUIRE_THAT(none, Catch::Contains("secret"));
    REQUIRE(watch.elapsed() < 2s);
  }
  SECTION("a server without the secret cannot pass for the store") {
    chorus::TcpStoreServer impostor("127.0.0.1", 0);
    std::string message = chorus::test::thrown_message<chorus::IoError>(
        [&] { chorus::TcpStore("127.0.0.1", impostor.port(), 5s, secret); });
    REQUIRE_THAT(message, Catch::Contains("secret"));
  }
  SECTION("strangers: garbage, requests without a proof, forged and replayed proofs are dropped") {
    using chorus::tcp_store::Op;
    const auto overwrite = chorus::tcp_store::encode_request(Op::set, {"chorus/default/address/0"}, bytes("forged"));
    {
      RawConnection raw(server.port(), Authenticate::no);
      raw.send(bytes("GET / HTTP/1.1\r\n\r\n"));
      REQUIRE(raw.closed_by_server());
    }
    {
      RawConnection raw(server.port(), Authenticate::no);
      raw.send(overwrite);  // a request where the proof belongs
      REQUIRE(raw.closed_by_server());
    }
    {
      RawConnection raw(server.port(), Authenticate::no);  // forged: a proof made with a guessed secret
      raw.send(chorus::tcp_store::encode_client_proof(raw.challenge(), chorus::fresh_challenge(),
                                                       chorus::JobSecret("guess")));
      raw.send(overwrite);
      REQUIRE(raw.closed_by_server());
    }
    {
      RawConnection raw(server.port(), Authenticate::no);  // no secret at all
      raw.send(chorus::tcp_store::encode_client_proof(raw.challenge(), chorus::fresh_challenge(), {}));
      raw.send(overwrite);
      REQUIRE(raw.closed_by_server());
    }
    {
      // Replayed: a valid proof recorded on one connection, sent on another.
      std::vector<std::byte> recorded;
      {
        RawConnection first(server.port(), Authenticate::no);
        recorded = chorus::tcp_store::encode_client_proof(first.challenge(), chorus::fresh_challenge(), secret);
      }
      RawConnection raw(server.port(), Authenticate::no);
      raw.send(recorded);
      raw.send(overwrite);
      REQUIRE(raw.closed_by_server());
    }
    REQUIRE(text(store.get("address/0", 1s)) == "the real one");
    // The proof is what admits: the same bytes with the right secret over this challenge pass.
    RawConnection admitted(server.port(), Authenticate::yes, secret);
    admitted.send(chorus::tcp_store::encode_request(Op::set, {"address/1"}, bytes("by a real client")));
    REQUIRE(admitted.receive(chorus::tcp_store::kReplyHeaderBytes).size() == chorus::tcp_store::kReplyHeaderBytes);
    REQUIRE(text(store.get("address/1", 1s)) == "by a real client");
  }
}

TEST_CASE("TcpStoreServer refuses values past its byte limit and frees what remove takes", "[tcp_store]") {
  chorus::TcpStoreServerOptions options;
  options.host = "127.0.0.1";
  options.max_stored_bytes = 1000;
  chorus::TcpStoreServer server(options);
  chorus::TcpStore store("127.0.0.1", server.port(), 2s);
  store.set("a", std::vector<std::byte>(600));
  std::string message = chorus::test::thrown_message<chorus::InvalidArgument>(
      [&] { store.set("b", std::vector<std::byte>(600)); });
  REQUIRE_THAT(message, Catch::Contains("full") && Catch::Contains("1000"));
  store.set("a", std::vector<std::byte>(900));  // replacing counts only the difference
  REQUIRE(store.remove("a"));
  store.set("b", std::vector<std::byte>(995));
  REQUIRE_THROWS_AS(store.add("counter", 1), chorus::InvalidArgument);
}

namespace {

// An IPv4 address of this machine other than loopback, if it has one.
std::optional<in_addr> non_loopback_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::optional<in_addr> found;
  for (ifaddrs* entry = list; entry != nullptr && !found; entry = entry->ifa_next) {
    if (!entry->ifa_addr || entry->ifa_addr->sa_family != AF_INET) continue;
    const in_addr address = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr;
    if ((ntohl(address.s_addr) >> 24) != 127) found = address;
  }
  ::freeifaddrs(list);
  return found;
}

bool accepts_connections(in_addr address, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(port);
  target.sin_addr = address;
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) == 0;
  ::close(fd);
  return connected;
}

}  // namespace

TEST_CASE("rank 0's embedded store listens only on the address its URL names", "[tcp_store]") {
  const uint16_t port = free_port();
  const chorus::JobSecret secret("the embedded store's job secret");
  chorus::OpenedStore opened = chorus::open_store("tcp://127.0.0.1:" + std::to_string(port), 0, "bind-job", 2s, secret);
  REQUIRE(opened.keep_alive);  // rank 0 hosts it
  opened.store->set("k", bytes("v"));
  in_addr loopback{};
  loopback.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(accepts_connections(loopback, port));
  const std::optional<in_addr> other = non_loopback_address();
  if (!other) {
    WARN("this machine has no address but loopback: the other half of the check cannot run");
    return;
  }
  CHECK_FALSE(accepts_connections(*other, port));
}
