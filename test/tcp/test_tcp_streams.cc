// TCP transport with several connections (streams) per pair of ranks: each
// (peer, stream) is its own connection with its own message order, the
// polling caller reads every stream, same-host detection counts peers, and a
// peer created with another stream count is refused at connect, naming both.
#include "base/error.h"
#include "test/transport/conformance.h"
#include "transport/tcp/tcp.h"

namespace chorus::transport::testing {
namespace {

using Catch::Matchers::Contains;

TestMesh make_stream_mesh(int size, int streams, Waiting waiting = Waiting::asleep) {
  DeviceOptions options = default_options();
  options.streams = streams;
  return make_mesh("tcp", size, waiting, options, streams);
}

TEST_CASE("tcp streams: each stream of a pair is its own connection with its own order", "[tcp]") {
  const int streams = 3;
  Requests requests;
  TestMesh mesh = make_stream_mesh(3, streams);
  // The same tag on every stream: a message only ever matches a receive on
  // its own stream, so the payloads cannot trade places.
  std::vector<Buffer> outgoing;
  std::vector<std::unique_ptr<ReceiveBuffer>> incoming;
  for (int stream = 0; stream < streams; ++stream) {
    for (int peer : {0, 1}) {
      const auto seed = static_cast<uint64_t>(stream * 10 + peer);
      outgoing.push_back(pattern(seed, 100000 + static_cast<size_t>(stream) * 7));
      incoming.push_back(std::make_unique<ReceiveBuffer>(outgoing.back().size()));
      mesh.pair(peer, 2, stream).post_recv(requests.add(), {42, 1}, incoming.back()->data());
    }
  }
  // Sent in reverse stream order, so matching by arrival would get it wrong.
  for (int stream = streams - 1; stream >= 0; --stream) {
    for (int peer : {0, 1}) {
      const auto index = static_cast<size_t>(stream * 2 + peer);
      mesh.pair(2, peer, stream).post_send(requests.add(), {42, 1}, outgoing[index]);
    }
  }
  for (Request& request : requests.all()) wait_ok(request);
  for (int stream = 0; stream < streams; ++stream)
    for (int peer : {0, 1}) {
      const auto index = static_cast<size_t>(stream * 2 + peer);
      CHECK(incoming[index]->holds(static_cast<uint64_t>(stream * 10 + peer)));
    }
  REQUIRE_FALSE(mesh.device(2).failure());
}

TEST_CASE("tcp streams: a polling caller reads a parked stream other than the first", "[tcp]") {
  Requests requests;
  TestMesh mesh = make_stream_mesh(2, 2, Waiting::by_test);
  Device& device = mesh.device(0);
  const Buffer outgoing = pattern(7, 1 << 20);
  ReceiveBuffer incoming(outgoing.size());
  Request& send = requests.add();
  Request& recv = requests.add();
  {
    // While the scope lasts the progress thread leaves every connection of
    // device 0 to this caller: unless progress() reads stream 1 too, the
    // receive never finishes.
    PollingScope<Device> polling(device);
    mesh.pair(0, 1, 1).post_recv(recv, {5, 5}, incoming.data());
    mesh.pair(1, 0, 1).post_send(send, {5, 5}, outgoing);
    REQUIRE(poll_until_finished(device, recv, 20s));
    REQUIRE(recv.state() == Request::State::done);
  }
  wait_ok(send);
  CHECK(incoming.holds(7));
}

TEST_CASE("tcp streams: the same-host link model does not depend on the stream count", "[tcp]") {
  TestMesh one = make_stream_mesh(2, 1);
  TestMesh three = make_stream_mesh(2, 3);
  const LinkModel expected = one.device(0).link_model(1);
  const LinkModel got = three.device(0).link_model(1);
  CHECK(got.alpha_seconds == expected.alpha_seconds);
  CHECK(got.beta_seconds_per_byte == expected.beta_seconds_per_byte);
}

TEST_CASE("tcp streams: a peer with another stream count is refused at connect, naming both", "[tcp]") {
  tcp::TcpDeviceOptions options;
  options.hostname = "127.0.0.1";
  options.size = 2;
  options.streams = 2;
  options.rank = 0;
  auto two = tcp::create_device(options);
  options.streams = 3;
  options.rank = 1;
  auto three = tcp::create_device(options);
  auto started = Clock::now();
  try {
    three->connect(0, two->address(), Deadline::after(5s));
    FAIL("connected to a peer with another stream count");
  } catch (const InvalidArgument& error) {
    CHECK_THAT(error.what(), Contains("rank 1 uses 3 streams") && Contains("peer rank 0 uses 2"));
  }
  try {
    two->connect(1, three->address(), Deadline::after(5s));
    FAIL("connected to a peer with another stream count");
  } catch (const InvalidArgument& error) {
    CHECK_THAT(error.what(), Contains("rank 0 uses 2 streams") && Contains("peer rank 1 uses 3"));
  }
  CHECK(Clock::now() - started < 1s);
  // A stream the device does not have.
  REQUIRE_THROWS_AS(two->connect(1, three->address(), Deadline::after(100ms), 2), InvalidArgument);
  options.streams = 0;
  REQUIRE_THROWS_AS(tcp::create_device(options), InvalidArgument);
}

}  // namespace
}  // namespace chorus::transport::testing
