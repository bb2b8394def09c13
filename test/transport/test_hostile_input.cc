// Regression tests for what the fuzz harnesses (fuzz/, docs/fuzzing.md)
// found in the transports' handling of bytes from a peer. Each drives the
// code the harness found it in, the way the harness did.
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <thread>

#include <catch2/catch.hpp>

#include "base/rejection_log.h"

#include "base/error.h"
#include "fuzz/recording_owner.h"
#include "transport/abort_report.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/connection.h"

namespace chorus::transport {
namespace {

// A TCP connection's device, reduced to recording the first failure: the
// harness's own (fuzz/recording_owner.h).
class TcpOwner final : public fuzz::RecordingOwner<tcp::ConnectionOwner> {
 public:
  void set_write_interest(tcp::Connection&, bool) override {}
  void stop_watching(tcp::Connection&) override {}
};

// A real Connection reading one end of a socketpair; the test is the peer.
struct ConnectionUnderTest {
  TcpOwner owner;
  Fd peer;
  std::unique_ptr<tcp::Connection> connection;

  ConnectionUnderTest() {
    int ends[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
    peer = Fd(ends[1]);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connection = std::make_unique<tcp::Connection>(
        owner, 1, 0, tcp::SocketAddress(reinterpret_cast<sockaddr*>(&address), sizeof(address)),
        tcp::AdmittedSocket{Fd(ends[0]), nullptr});
  }
  ~ConnectionUnderTest() {
    connection->fail_everything(std::make_exception_ptr(Aborted("test over")), {}, Clock::now());
    connection->close_socket();
  }

  // Writes everything, letting the connection read whenever the socket is full.
  void send(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(peer.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes = bytes.subspan(static_cast<size_t>(n));
      } else {
        REQUIRE((n < 0 && errno == EAGAIN));
        REQUIRE_FALSE(owner.failed());
        connection->on_readable();
      }
    }
  }
  void send_data_header(Tag tag, uint64_t payload_bytes) {
    tcp::FrameHeader header;
    header.kind = tcp::FrameKind::data;
    header.tag_value = tag.value;
    header.tag_signature = tag.signature;
    header.tag_group = tag.group;
    header.payload_bytes = payload_bytes;
    send(tcp::encode_header(header));
  }
};

std::vector<std::byte> pattern(size_t size) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(i * 7 + (i >> 11));
  return bytes;
}

// Where two byte strings first differ (-1: nowhere); Catch would print
// megabytes of both.
long first_difference(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  const auto [in_a, in_b] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return in_a == a.end() && in_b == b.end() ? -1 : static_cast<long>(in_a - a.begin());
}

// fuzz/tcp_frames found this: a data frame for which no receive was posted
// made the connection allocate (and zero) the whole announced payload at
// once, so a peer announcing 4 GB cost 4 GB before sending a byte (and 1 TB
// failed the connection for want of memory). Announcements past
// CHORUS_MAX_UNEXPECTED_BYTES fail at once (test_failures.cc); one under it
// costs only what arrives.
TEST_CASE("tcp: a frame announcing a huge unexpected message costs only the bytes that arrive",
          "[hostile_input]") {
  ConnectionUnderTest test;
  const Tag tag{7, 100, 0};
  test.send_data_header(tag, uint64_t{1} << 29);
  const std::vector<std::byte> start = pattern(1000);
  test.send(start);
  test.connection->on_readable();
  CHECK_FALSE(test.owner.failed());

  // A receive of another length is a mismatch, named with the announced length.
  CompletionSignal signal;
  Request request;
  request.attach(&signal);
  std::vector<std::byte> buffer(1000);
  test.connection->post_recv(request, tag, buffer);
  REQUIRE(test.owner.failed());
  CHECK_THROWS_AS(std::rethrow_exception(test.owner.failure()), MismatchError);
  CHECK_THROWS_WITH(std::rethrow_exception(test.owner.failure()), Catch::Matchers::Contains("536870912 bytes"));
}

TEST_CASE("tcp: an unexpected message arriving in many pieces lands whole", "[hostile_input]") {
  ConnectionUnderTest test;
  CompletionSignal signal;
  const Tag early{1, 5, 9}, late{2, 5, 9};
  // Over several pieces of the unexpected buffer, read as it arrives.
  const std::vector<std::byte> first = pattern((size_t{3} << 20) + 13);
  test.send_data_header(early, first.size());
  test.send(first);
  // The second one's receive is posted while its payload is still arriving,
  // past the first of its chunks: what arrived is copied to the receive,
  // the rest lands there directly.
  const std::vector<std::byte> second = pattern((size_t{3} << 20) + 5);
  const size_t arrived_before_post = (size_t{3} << 19) + 7;
  test.send_data_header(late, second.size());
  test.send(std::span(second).first(arrived_before_post));
  test.connection->on_readable();
  Request late_request;
  late_request.attach(&signal);
  std::vector<std::byte> late_buffer(second.size());
  test.connection->post_recv(late_request, late, late_buffer);
  test.send(std::span(second).subspan(arrived_before_post));
  test.connection->on_readable();
  REQUIRE_FALSE(test.owner.failed());
  REQUIRE(late_request.state() == Request::State::done);
  CHECK(first_difference(late_buffer, second) == -1);

  Request early_request;
  early_request.attach(&signal);
  std::vector<std::byte> early_buffer(first.size());
  test.connection->post_recv(early_request, early, early_buffer);
  REQUIRE(early_request.state() == Request::State::done);
  CHECK(first_difference(early_buffer, first) == -1);
}

// fuzz/abort_report found this: the rank a peer's abort report blames was
// cast to int as it came, so 2^32 - 1 became -1 ("no single peer") and
// other values any rank at all, even negative ones.
TEST_CASE("an abort report blaming a rank no int holds blames the peer that sent it", "[hostile_input]") {
  for (uint64_t blamed : {uint64_t{0xffffffff}, uint64_t{1} << 32, (uint64_t{1} << 32) + 2, uint64_t{INT_MAX} + 1}) {
    const std::exception_ptr error = adopt_abort(1, blamed, "gone", 0, 3);
    try {
      std::rethrow_exception(error);
    } catch (const IoError& io) {
      CHECK(io.peer_rank() == 3);
    }
  }
  // A rank that fits is kept; this rank itself is never blamed.
  try {
    std::rethrow_exception(adopt_abort(1, 2, "gone", 0, 3));
  } catch (const IoError& io) {
    CHECK(io.peer_rank() == 2);
  }
  try {
    std::rethrow_exception(adopt_abort(1, 0, "gone", 0, 3));
  } catch (const IoError& io) {
    CHECK(io.peer_rank() == 3);
  }
}

TEST_CASE("an abort relayed through several ranks names its origin once", "[hostile_input]") {
  const auto message = [](std::string_view text) {
    try {
      std::rethrow_exception(adopt_abort(4, 0, text, 5, 1));
    } catch (const MismatchError& error) {
      return std::string(error.what());
    }
    return std::string("not a MismatchError");
  };
  CHECK(message("rank 1: peer rank 2 aborted: rank 2: peer rank 3 aborted: rank 3: broadcast root 9 is out of range") ==
        "rank 5: peer rank 3 aborted (relayed by rank 1): rank 3: broadcast root 9 is out of range");
  // Relayed again, in the same format: still named once.
  CHECK(message("rank 1: peer rank 3 aborted (relayed by rank 2): rank 3: broadcast root 9 is out of range") ==
        "rank 5: peer rank 3 aborted (relayed by rank 1): rank 3: broadcast root 9 is out of range");
  CHECK(message("rank 1: broadcast root 9 is out of range") ==
        "rank 5: peer rank 1 aborted: rank 1: broadcast root 9 is out of range");
  // Only whole hops are dropped: text that merely starts like one stays.
  CHECK(message("rank 1: peer rank x aborted: rank 3: odd") ==
        "rank 5: peer rank 1 aborted: rank 1: peer rank x aborted: rank 3: odd");
  CHECK(message("rank 1: peer rank 2 aborted: ") == "rank 5: peer rank 1 aborted: ");
}

}  // namespace
}  // namespace chorus::transport

namespace chorus::transport {
namespace {

// fuzz/handshake found this: the TCP handshake's challenge message accepted
// any bytes where its padding is, so two different messages meant the same.
TEST_CASE("tcp: a handshake challenge with nonzero padding is refused", "[hostile_input]") {
  const Challenge challenge = fresh_challenge();
  tcp::ChallengeMessage message = tcp::encode_challenge(challenge);
  Challenge decoded{};
  REQUIRE(tcp::decode_challenge(message, decoded).empty());
  CHECK(decoded == challenge);
  message[6] = std::byte{1};
  CHECK_FALSE(tcp::decode_challenge(message, decoded).empty());
}

}  // namespace
}  // namespace chorus::transport

TEST_CASE("rejected connections: a line per source per interval, at most 20 an interval, the rest summed up",
          "[hostile_input]") {
  using chorus::RejectionLog;
  using namespace std::chrono_literals;
  RejectionLog log(10s);
  const RejectionLog::Clock::time_point start{};
  auto at = [&](std::chrono::milliseconds offset) { return start + 1h + offset; };
  CHECK(log.admit("pid 7", at(0ms)));
  CHECK_FALSE(log.summary(at(0ms)));  // nothing counted yet
  for (int i = 0; i < 1000; ++i) CHECK_FALSE(log.admit("pid 7", at(std::chrono::milliseconds(1 + i))));
  CHECK(log.summary_due() == at(10001ms));
  CHECK_FALSE(log.summary(at(10000ms)));  // its interval is not over
  const std::optional<std::string> summary = log.summary(at(10001ms));
  REQUIRE(summary);
  CHECK_THAT(*summary, Catch::Contains("dropped 1000 more connections from 1 source in the last 10 s"));
  CHECK_FALSE(log.summary(at(30s)));  // said once
  CHECK(log.admit("pid 7", at(10001ms)));  // a new interval: the source's next line
  // Many sources at once: 20 lines an interval in all, the rest in one summary.
  int lines = 0;
  for (int source = 0; source < 100; ++source)
    if (log.admit("10.0.0." + std::to_string(source), at(21s))) ++lines;
  CHECK(lines == static_cast<int>(RejectionLog::kMaxLinesPerInterval));
  const std::optional<std::string> many = log.summary(at(31s));
  REQUIRE(many);
  CHECK_THAT(*many, Catch::Contains("dropped 80 more connections from 80 sources"));
  CHECK(log.unlogged() == 1000 + 80);
}

