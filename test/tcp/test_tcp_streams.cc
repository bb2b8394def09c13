// TCP transport with several connections (streams) per pair of ranks: each
// (peer, stream) is its own connection with its own message order, the
// polling caller reads every stream, same-host detection counts peers, and a
// peer created with another stream count is refused at connect, naming both.
#include <deque>
#include <thread>

#include "base/error.h"
#include "test/tcp/mesh.h"

namespace chorus::transport::tcp::testing {
namespace {

using Catch::Matchers::Contains;

struct StreamMesh {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::vector<std::vector<std::unique_ptr<Pair>>>> pairs;  // [rank][stream][peer]
  Pair& pair(int rank, int stream, int peer) { return *pairs[rank][stream][peer]; }
};

// Every rank connects every stream to every peer from its own thread, in the
// order chorus::connect uses (peer outer, stream inner).
StreamMesh make_stream_mesh(int size, int streams) {
  TcpDeviceOptions options;
  options.streams = streams;
  StreamMesh mesh;
  mesh.devices = make_devices(size, options);
  std::vector<std::vector<std::byte>> addresses;
  for (auto& device : mesh.devices) addresses.push_back(device->address());
  mesh.pairs.resize(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  auto deadline = Deadline::after(10s);
  for (int rank = 0; rank < size; ++rank) {
    mesh.pairs[rank].resize(streams);
    for (auto& by_peer : mesh.pairs[rank]) by_peer.resize(size);
    threads.emplace_back([&, rank] {
      try {
        for (int peer = 0; peer < size; ++peer)
          for (int stream = 0; stream < streams && peer != rank; ++stream)
            mesh.pairs[rank][stream][peer] = mesh.devices[rank]->connect(peer, addresses[peer], deadline, stream);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
  return mesh;
}

TEST_CASE("tcp streams: each stream of a pair is its own connection with its own order", "[tcp]") {
  const int streams = 3;
  StreamMesh mesh = make_stream_mesh(3, streams);
  CompletionSignal signal;
  // The same tag on every stream: a message only ever matches a receive on
  // its own stream, so the payloads cannot trade places.
  std::vector<std::vector<std::byte>> outgoing, incoming;
  std::deque<Request> requests;
  for (int stream = 0; stream < streams; ++stream) {
    for (int peer : {0, 1}) {
      const size_t seed = static_cast<size_t>(stream * 10 + peer);
      outgoing.push_back(pattern(seed, 100000 + static_cast<size_t>(stream) * 7));
      incoming.emplace_back(outgoing.back().size());
      requests.emplace_back().attach(&signal);
      mesh.pair(peer, stream, 2).post_recv(requests.back(), {42, 1}, incoming.back());
    }
  }
  // Sent in reverse stream order, so matching by arrival would get it wrong.
  for (int stream = streams - 1; stream >= 0; --stream) {
    for (int peer : {0, 1}) {
      const size_t index = static_cast<size_t>(stream * 2 + peer);
      requests.emplace_back().attach(&signal);
      mesh.pair(2, stream, peer).post_send(requests.back(), {42, 1}, outgoing[index]);
    }
  }
  for (Request& request : requests) wait_ok(request);
  for (int stream = 0; stream < streams; ++stream)
    for (int peer : {0, 1}) {
      const size_t index = static_cast<size_t>(stream * 2 + peer);
      CHECK(first_mismatch(incoming[index], static_cast<size_t>(stream * 10 + peer)) == incoming[index].size());
    }
  REQUIRE_FALSE(mesh.devices[2]->failure());
}

TEST_CASE("tcp streams: a polling caller reads a parked stream other than the first", "[tcp]") {
  StreamMesh mesh = make_stream_mesh(2, 2);
  Device& device = *mesh.devices[0];
  auto outgoing = pattern(7, 1 << 20);
  std::vector<std::byte> incoming(outgoing.size());
  CompletionSignal signal;
  Request send, recv;
  send.attach(&signal);
  recv.attach(&signal);
  {
    // While the scope lasts the progress thread leaves every connection of
    // device 0 to this caller: unless progress() reads stream 1 too, the
    // receive never finishes.
    PollingScope polling(device);
    mesh.pair(0, 1, 1).post_recv(recv, {5, 5}, incoming);
    mesh.pair(1, 1, 0).post_send(send, {5, 5}, outgoing);
    auto give_up = Clock::now() + 20s;
    while (!recv.finished() && Clock::now() < give_up) device.progress();
    REQUIRE(recv.state() == Request::State::done);
  }
  wait_ok(send);
  CHECK(first_mismatch(incoming, 7) == incoming.size());
}

TEST_CASE("tcp streams: the same-host link model does not depend on the stream count", "[tcp]") {
  StreamMesh one = make_stream_mesh(2, 1);
  StreamMesh three = make_stream_mesh(2, 3);
  const LinkModel expected = one.devices[0]->link_model(1);
  const LinkModel got = three.devices[0]->link_model(1);
  CHECK(got.alpha_seconds == expected.alpha_seconds);
  CHECK(got.beta_seconds_per_byte == expected.beta_seconds_per_byte);
}

TEST_CASE("tcp streams: a peer with another stream count is refused at connect, naming both", "[tcp]") {
  TcpDeviceOptions options;
  options.hostname = "127.0.0.1";
  options.size = 2;
  options.streams = 2;
  options.rank = 0;
  auto two = create_device(options);
  options.streams = 3;
  options.rank = 1;
  auto three = create_device(options);
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
  REQUIRE_THROWS_AS(create_device(options), InvalidArgument);
}

}  // namespace
}  // namespace chorus::transport::tcp::testing
