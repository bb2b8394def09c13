// Transport conformance, the data path: FIFO order on one tag, matching by
// (group, value), every message size from 0 bytes past 4 GiB (around each
// transport's internal thresholds), receives posted before, during and after
// arrival, a concurrent all-to-all, threads sharing a pair, and a job end
// that prints nothing. Every payload is checked byte for byte, with guard
// bytes after each receive buffer.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "test/transport/conformance.h"

namespace chorus::transport::testing {
namespace {

// Sizes around the thresholds the transports have or had: 64 KiB (shm's
// pull threshold until it became the ring's size), the most one shm ring
// record carries (256 KiB - 64), shm's ring and pull threshold (1 MiB),
// tcp's staging buffer; and large messages.
const std::vector<size_t> kThresholdSizes = {
    0,
    1,
    7,
    8,
    4095,
    4096,
    (size_t{64} << 10) - 1,
    size_t{64} << 10,
    (size_t{64} << 10) + 1,
    (size_t{256} << 10) - 65,
    (size_t{256} << 10) - 64,
    (size_t{256} << 10) - 63,
    (size_t{1} << 20) - 1,
    size_t{1} << 20,
    (size_t{1} << 20) + 1,
    (size_t{16} << 20) + 3,
    size_t{256} << 20,
};

// Posts a send, then gives the message time to arrive before anyone
// receives it: until the send finished (it is buffered somewhere) or, where a
// send waits for its receive (shm's single-copy pulls), for a nap.
void send_and_let_arrive(Pair& pair, Request& send, Tag tag, std::span<const std::byte> data) {
  pair.post_send(send, tag, data);
  const auto nap = data.size() > (size_t{1} << 20) ? 300ms : 20ms;
  const auto until = Clock::now() + nap;
  while (!send.finished() && Clock::now() < until) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(5ms);
}

TEST_CASE("transport: messages of 0 B to 256 MiB arrive intact, receive posted before or after arrival",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2);
  for (size_t size : kThresholdSizes) {
    INFO("message of " << size << " bytes");
    {
      // rank 0 -> rank 1 with the receive already posted.
      const auto outgoing = pattern(size, size);
      ReceiveBuffer incoming(size);
      Request& recv = requests.add();
      Request& send = requests.add();
      mesh.pair(1, 0).post_recv(recv, {size + 1, 77}, incoming.data());
      mesh.pair(0, 1).post_send(send, {size + 1, 77}, outgoing);
      wait_ok(send);
      wait_ok(recv);
      CHECK(first_mismatch(incoming.data(), size) == size);
      CHECK(incoming.guard_intact());
    }
    {
      // rank 1 -> rank 0 with the receive posted after the message arrived.
      const auto outgoing = pattern(size + 7, size);
      ReceiveBuffer incoming(size);
      Request& recv = requests.add();
      Request& send = requests.add();
      send_and_let_arrive(mesh.pair(1, 0), send, {size + 2, 78}, outgoing);
      mesh.pair(0, 1).post_recv(recv, {size + 2, 78}, incoming.data());
      wait_ok(recv);
      wait_ok(send);
      CHECK(first_mismatch(incoming.data(), size + 7) == size);
      CHECK(incoming.guard_intact());
    }
  }
  REQUIRE_FALSE(mesh.device(0).failure());
  REQUIRE_FALSE(mesh.device(1).failure());
}

TEST_CASE("transport: an eager send finishes before its receive is posted, whatever its size", "[transport]") {
  // Point-to-point sends are eager (Tag::eager): chorus::send promises to
  // finish once the transport holds the data, so a ring of blocking sends
  // before receives cannot deadlock. shm's single-copy pulls (from 64 KiB)
  // would wait for the receive; above its 1 MiB ring the receiver's thread
  // drains the ring into its own buffer.
  FOR_EACH_TRANSPORT(transport);
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2);
  uint64_t value = 500;
  for (size_t size : {size_t{64} << 10, size_t{100000}, (size_t{1} << 20) + 1, size_t{4} << 20}) {
    INFO("message of " << size << " bytes");
    const auto outgoing = pattern(value, size);
    Tag tag{value, 3};
    tag.eager = true;
    Request& send = requests.add();
    mesh.pair(0, 1).post_send(send, tag, outgoing);
    wait_ok(send, 10s);
    ReceiveBuffer incoming(size);
    Request& recv = requests.add();
    mesh.pair(1, 0).post_recv(recv, {value, 3}, incoming.data());
    wait_ok(recv);
    CHECK(first_mismatch(incoming.data(), value) == size);
    CHECK(incoming.guard_intact());
    ++value;
  }
  REQUIRE_FALSE(mesh.device(0).failure());
  REQUIRE_FALSE(mesh.device(1).failure());
}

TEST_CASE("transport: a sender far ahead of every receive stays under the unexpected-bytes limit", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  DeviceOptions options = default_options();
  // The transports that make such a sender wait for its receiver (their
  // eager windows): shm by pulls, where it may pull; tcp by announcements.
  const bool waits = (transport == "shm" && options.config.shm_single_copy) || transport == "tcp";
  if (!waits) return;
  options.config.max_unexpected_bytes = size_t{4} << 20;
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2, Waiting::asleep, options);
  // 32 MiB in messages under the pull threshold, eight times the limit,
  // all sent before any receive is posted, on one tag: those that went
  // eagerly and those that waited still match in the order they were sent.
  constexpr size_t kMessages = 128;
  constexpr size_t kBytes = size_t{256} << 10;
  std::vector<Buffer> outgoing;
  std::vector<Request*> sends;
  for (size_t i = 0; i < kMessages; ++i) {
    outgoing.push_back(pattern(900 + i, kBytes));
    sends.push_back(&requests.add());
    mesh.pair(0, 1).post_send(*sends.back(), {7, 5}, outgoing.back());
  }
  std::this_thread::sleep_for(200ms);
  REQUIRE_FALSE(mesh.device(1).failure());
  std::vector<std::unique_ptr<ReceiveBuffer>> incoming;
  std::vector<Request*> recvs;
  for (size_t i = 0; i < kMessages; ++i) {
    incoming.push_back(std::make_unique<ReceiveBuffer>(kBytes));
    recvs.push_back(&requests.add());
    mesh.pair(1, 0).post_recv(*recvs.back(), {7, 5}, incoming[i]->data());
  }
  for (size_t i = 0; i < kMessages; ++i) {
    INFO("message " << i);
    wait_ok(*recvs[i], 10s);
    REQUIRE(incoming[i]->holds(900 + i));
  }
  for (Request* send : sends) wait_ok(*send);
  REQUIRE_FALSE(mesh.device(0).failure());
  REQUIRE_FALSE(mesh.device(1).failure());
}

TEST_CASE("transport: a receive posted while its message is still arriving", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2);
  // Large enough that the post lands while the payload streams in.
  const size_t size = size_t{64} << 20;
  const auto outgoing = pattern(3, size);
  ReceiveBuffer incoming(size);
  Request& send = requests.add();
  Request& recv = requests.add();
  mesh.pair(0, 1).post_send(send, {9, 1}, outgoing);
  std::this_thread::sleep_for(2ms);
  mesh.pair(1, 0).post_recv(recv, {9, 1}, incoming.data());
  wait_ok(send);
  wait_ok(recv);
  REQUIRE(incoming.holds(3));
}

TEST_CASE("transport: many messages on one tag arrive in order, receives posted before and after", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2);
  // Runs of three messages of one size, so a swap shows as a wrong payload
  // within a run and as a length mismatch across runs; the sizes cross the
  // thresholds, so eager and single-copy messages interleave on the tag.
  const std::vector<size_t> sizes = {0, 1, 100, 65535, 65536, 5000, 300000, (size_t{1} << 20) + 1, 64};
  constexpr size_t kMessages = 240;
  const Tag tag{7, 3, 0x5d1c};
  auto size_of = [&](size_t i) { return sizes[(i / 3) % sizes.size()]; };
  std::vector<Buffer> outgoing;
  std::vector<std::unique_ptr<ReceiveBuffer>> incoming;
  for (size_t i = 0; i < kMessages; ++i) {
    outgoing.push_back(pattern(1000 + i, size_of(i)));
    incoming.push_back(std::make_unique<ReceiveBuffer>(size_of(i)));
  }
  std::vector<Request*> recvs, sends;
  // The first half of the receives is posted before anything is sent...
  for (size_t i = 0; i < kMessages / 2; ++i) {
    recvs.push_back(&requests.add());
    mesh.pair(1, 0).post_recv(*recvs.back(), tag, incoming[i]->data());
  }
  for (size_t i = 0; i < kMessages; ++i) {
    sends.push_back(&requests.add());
    mesh.pair(0, 1).post_send(*sends.back(), tag, outgoing[i]);
  }
  std::this_thread::sleep_for(100ms);
  // ...the second half after the messages arrived.
  for (size_t i = kMessages / 2; i < kMessages; ++i) {
    recvs.push_back(&requests.add());
    mesh.pair(1, 0).post_recv(*recvs.back(), tag, incoming[i]->data());
  }
  for (size_t i = 0; i < kMessages; ++i) {
    INFO("message " << i << " of " << size_of(i) << " bytes");
    wait_ok(*recvs[i]);
    REQUIRE(incoming[i]->holds(1000 + i));
  }
  for (Request* send : sends) wait_ok(*send);
}

TEST_CASE("transport: a long one-way run of large messages with every receive posted first", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  // Every message is past the eager size and nothing flows the other way
  // but the receiver's answers to the announcements: a transport with
  // receive credits must hand back the credits of the data's arrivals too.
  // (ibverbs once stalled here: its sender announced everything first, then
  // spent its window on writes that were never owed back.)
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2);
  constexpr size_t kMessages = 90;
  constexpr size_t kBytes = 20000;
  std::vector<Buffer> outgoing;
  std::vector<std::unique_ptr<ReceiveBuffer>> incoming;
  std::vector<Request*> recvs, sends;
  for (size_t i = 0; i < kMessages; ++i) {
    incoming.push_back(std::make_unique<ReceiveBuffer>(kBytes));
    recvs.push_back(&requests.add());
    mesh.pair(0, 1).post_recv(*recvs.back(), {i, 0}, incoming[i]->data());
  }
  for (size_t i = 0; i < kMessages; ++i) {
    outgoing.push_back(pattern(500 + i, kBytes));
    sends.push_back(&requests.add());
    mesh.pair(1, 0).post_send(*sends.back(), {i, 0}, outgoing.back());
  }
  for (size_t i = 0; i < kMessages; ++i) {
    INFO("message " << i);
    wait_ok(*recvs[i], 10s);
    REQUIRE(incoming[i]->holds(500 + i));
  }
  for (Request* send : sends) wait_ok(*send);
}

TEST_CASE("transport: out-of-order tags match by group and value, FIFO among equal tags", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2);
  // (value, group) keys where one's group is another's value, so a transport
  // that mixes the two up, or ignores the group, delivers a wrong payload.
  // Sizes depend on the value and the repeat only: a message that crosses
  // into another group arrives with the right length and the wrong bytes.
  const std::vector<uint64_t> groups = {0, 1, 2, 0x5d1c00000000ab};
  constexpr uint64_t kValues = 12;
  constexpr size_t kRepeats = 3;  // messages per tag, matched first in, first out
  const std::vector<size_t> sizes = {0, 17, 4096, 65536, 70001, 3};
  struct Message {
    Tag tag;
    uint64_t seed;
    size_t size;
  };
  std::vector<Message> messages;  // in sending order
  for (size_t repeat = 0; repeat < kRepeats; ++repeat)
    for (uint64_t value = 0; value < kValues; ++value)
      for (uint64_t group : groups)
        messages.push_back({{value, 5, group}, messages.size() + 1, sizes[(value + repeat) % sizes.size()]});
  std::vector<Buffer> outgoing;
  std::vector<std::unique_ptr<ReceiveBuffer>> incoming;
  for (const Message& message : messages) {
    outgoing.push_back(pattern(message.seed, message.size));
    incoming.push_back(std::make_unique<ReceiveBuffer>(message.size));
  }
  std::vector<Request*> recvs(messages.size());
  // For each (value, group), its receives in order: posted in reverse order
  // of the keys, half of the keys before anything is sent, half after.
  auto post_receives = [&](bool before) {
    for (size_t key = kValues * groups.size(); key-- > 0;) {
      if ((key % 2 == 0) != before) continue;
      for (size_t repeat = 0; repeat < kRepeats; ++repeat) {
        const size_t index = repeat * kValues * groups.size() + key;
        recvs[index] = &requests.add();
        mesh.pair(1, 0).post_recv(*recvs[index], messages[index].tag, incoming[index]->data());
      }
    }
  };
  post_receives(true);
  for (size_t index = 0; index < messages.size(); ++index)
    mesh.pair(0, 1).post_send(requests.add(), messages[index].tag, outgoing[index]);
  std::this_thread::sleep_for(50ms);
  post_receives(false);
  for (size_t index = 0; index < messages.size(); ++index) {
    INFO("value " << messages[index].tag.value << " group " << messages[index].tag.group << ", message " << index);
    recvs[index]->wait(Deadline::never(), "test: never");  // an unbounded wait must work too
    REQUIRE(incoming[index]->holds(messages[index].seed));
  }
  for (Request& request : requests.all()) wait_ok(request);
}

TEST_CASE("transport: the same value in another group never matches", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2);
  const size_t size = GENERATE(size_t{40}, size_t{100000});
  INFO("messages of " << size << " bytes");
  const auto first_group = pattern(1, size), second_group = pattern(2, size);
  ReceiveBuffer for_first(size), for_second(size);
  Request& recv_first = requests.add();
  mesh.pair(1, 0).post_recv(recv_first, {9, 4, 1}, for_first.data());
  // Group 2's message with the same value and signature arrives first...
  mesh.pair(0, 1).post_send(requests.add(), {9, 4, 2}, second_group);
  std::this_thread::sleep_for(100ms);
  // ...and must wait for a receive of its own group.
  CHECK(recv_first.state() == Request::State::pending);
  CHECK(for_first.untouched());
  mesh.pair(0, 1).post_send(requests.add(), {9, 4, 1}, first_group);
  wait_ok(recv_first);
  CHECK(for_first.holds(1));
  Request& recv_second = requests.add();
  mesh.pair(1, 0).post_recv(recv_second, {9, 4, 2}, for_second.data());
  wait_ok(recv_second);
  CHECK(for_second.holds(2));
  for (Request& request : requests.all()) wait_ok(request);
}

// Pair::find_unclaimed, what the late root checks look through for frames
// nobody will take (algorithms/execution/late_root_checks.h): the oldest
// message of the group that the filter accepts, announced or pulled ones
// included, and never one a receive took.
TEST_CASE("transport: find_unclaimed names the oldest unclaimed message of its group that the filter accepts",
          "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2);
  const size_t size = GENERATE(size_t{40}, size_t{2} << 20);
  INFO("messages of " << size << " bytes");
  const auto any = [](const Tag&) { return true; };
  const auto value_of = [](const std::optional<Tag>& tag) { return tag ? static_cast<int64_t>(tag->value) : -1; };
  Pair& receiver = mesh.pair(1, 0);
  CHECK(value_of(receiver.find_unclaimed(1, 16, any)) == -1);
  const auto fifth = pattern(5, size), sixth = pattern(6, size), seventh = pattern(7, size);
  send_and_let_arrive(mesh.pair(0, 1), requests.add(), {5, 50, 1}, fifth);
  send_and_let_arrive(mesh.pair(0, 1), requests.add(), {6, 60, 1}, sixth);
  send_and_let_arrive(mesh.pair(0, 1), requests.add(), {7, 70, 2}, seventh);
  // The receiver's transport thread lands them; nothing here polls.
  const auto until = Clock::now() + 5s;
  while (value_of(receiver.find_unclaimed(2, 16, any)) != 7 && Clock::now() < until) std::this_thread::sleep_for(1ms);
  CHECK(value_of(receiver.find_unclaimed(1, 16, any)) == 5);
  CHECK(value_of(receiver.find_unclaimed(1, 16, [](const Tag& tag) { return tag.signature == 60; })) == 6);
  CHECK(value_of(receiver.find_unclaimed(1, 16, [](const Tag&) { return false; })) == -1);
  CHECK(value_of(receiver.find_unclaimed(2, 16, any)) == 7);
  CHECK(value_of(receiver.find_unclaimed(3, 16, any)) == -1);
  // Only the group's `oldest` oldest are looked at.
  CHECK(value_of(receiver.find_unclaimed(1, 1, [](const Tag& tag) { return tag.signature == 60; })) == -1);
  CHECK(value_of(receiver.find_unclaimed(1, 2, [](const Tag& tag) { return tag.signature == 60; })) == 6);
  // Nothing went the other way.
  CHECK(value_of(mesh.pair(0, 1).find_unclaimed(1, 16, any)) == -1);
  // Looking claims nothing: every message still arrives whole.
  ReceiveBuffer for_fifth(size), for_sixth(size), for_seventh(size);
  Request& recv_fifth = requests.add();
  receiver.post_recv(recv_fifth, {5, 50, 1}, for_fifth.data());
  wait_ok(recv_fifth);
  CHECK(for_fifth.holds(5));
  CHECK(value_of(receiver.find_unclaimed(1, 16, any)) == 6);
  receiver.post_recv(requests.add(), {6, 60, 1}, for_sixth.data());
  receiver.post_recv(requests.add(), {7, 70, 2}, for_seventh.data());
  for (Request& request : requests.all()) wait_ok(request);
  CHECK(for_sixth.holds(6));
  CHECK(for_seventh.holds(7));
  CHECK(value_of(receiver.find_unclaimed(1, 16, any)) == -1);
  CHECK(value_of(receiver.find_unclaimed(2, 16, any)) == -1);
}

TEST_CASE("transport: a message larger than 4 GiB arrives intact", "[transport][large]") {
  FOR_EACH_TRANSPORT(transport);
  // One such message per transport: ~8.6 GiB of memory for both buffers.
  // CHORUS_TEST_LARGE_BYTES makes it smaller where memory is short (the
  // Soft-RoCE VM moves 2.3 GB: past the 2 GiB that 31-bit lengths allow,
  // if not past 4 GiB).
  const char* configured = std::getenv("CHORUS_TEST_LARGE_BYTES");
  const size_t size = configured && *configured ? std::stoull(configured) : (size_t{1} << 32) + 4099;
  Requests requests;  // outlives the mesh
  TestMesh mesh = make_mesh(transport, 2);
  const Buffer outgoing = repeating_pattern(4242, size);
  ReceiveBuffer incoming(size, std::byte{0});
  Request& recv = requests.add();
  Request& send = requests.add();
  const auto started = Clock::now();
  mesh.pair(1, 0).post_recv(recv, {1, 1}, incoming.data());
  mesh.pair(0, 1).post_send(send, {1, 1}, outgoing);
  wait_ok(send, 300s);
  wait_ok(recv, 300s);
  WARN(transport << ": " << size << " bytes moved in " << seconds_since(started) << " s");
  const size_t wrong = first_mismatch_repeating(incoming.data(), 4242);
  INFO("first wrong byte at " << wrong);
  REQUIRE(wrong == size);
  REQUIRE(incoming.guard_intact());
}

TEST_CASE("transport: four ranks exchange all-to-all concurrently", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  constexpr int kRanks = 4;
  constexpr size_t kRounds = 30;
  TestMesh mesh = make_mesh(transport, kRanks);
  std::atomic<int> bad{0};
  std::atomic<int> errors{0};
  auto seed = [](int from, int to, size_t round) { return static_cast<uint64_t>((from * 31 + to) * 1000) + round; };
  auto size_of = [](int from, int to, size_t round) -> size_t {
    if ((round + static_cast<size_t>(from + to)) % 10 == 0) return (size_t{1} << 20) + 1;
    return (round * 7919 + static_cast<size_t>(from) * 104729 + static_cast<size_t>(to) * 17) % 300000;
  };
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] {
      // Outside the try: a failed rank aborts its device before they go.
      Requests requests;
      std::vector<Buffer> outgoing;
      std::vector<std::unique_ptr<ReceiveBuffer>> incoming;
      std::vector<uint64_t> seeds;
      try {
        for (size_t round = 0; round < kRounds; ++round)
          for (int peer = 0; peer < kRanks; ++peer) {
            if (peer == rank) continue;
            outgoing.push_back(pattern(seed(rank, peer, round), size_of(rank, peer, round)));
            incoming.push_back(std::make_unique<ReceiveBuffer>(size_of(peer, rank, round)));
            seeds.push_back(seed(peer, rank, round));
          }
        size_t i = 0;
        for (size_t round = 0; round < kRounds; ++round)
          for (int peer = 0; peer < kRanks; ++peer) {
            if (peer == rank) continue;
            mesh.pair(rank, peer).post_recv(requests.add(), {round, 0}, incoming[i]->data());
            mesh.pair(rank, peer).post_send(requests.add(), {round, 0}, outgoing[i]);
            ++i;
          }
        for (Request& request : requests.all()) wait_ok(request);
        for (size_t i = 0; i < incoming.size(); ++i)
          if (!incoming[i]->holds(seeds[i])) ++bad;
      } catch (const std::exception& error) {
        std::fprintf(stderr, "rank %d: %s\n", rank, error.what());
        ++errors;
        mesh.device(rank).abort(std::current_exception());
      }
    });
  }
  for (auto& thread : ranks) thread.join();
  REQUIRE(errors == 0);
  REQUIRE(bad == 0);
}

TEST_CASE("transport: threads sharing one pair post concurrently", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  // As split Contexts do: several threads of one rank post on the same
  // Pair at once, each its own tag group, in both directions.
  constexpr int kThreads = 4;
  constexpr uint64_t kMessages = 40;
  TestMesh mesh = make_mesh(transport, 2);
  const std::vector<size_t> sizes = {0, 9, 4096, 65536, 200000, (size_t{1} << 20) + 1};
  auto seed = [](int from, int thread, uint64_t i) { return static_cast<uint64_t>(from * 100000 + thread * 1000) + i; };
  auto size_of = [&](int thread, uint64_t i) { return sizes[(static_cast<size_t>(thread) + i) % sizes.size()]; };
  std::atomic<int> bad{0}, errors{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    for (int thread = 0; thread < kThreads; ++thread)
      threads.emplace_back([&, rank, thread] {
        const int peer = 1 - rank;
        Requests requests;
        std::vector<Buffer> outgoing;
        std::vector<std::unique_ptr<ReceiveBuffer>> incoming;
        try {
          for (uint64_t i = 0; i < kMessages; ++i) {
            const Tag tag{i % 3, 1, static_cast<uint64_t>(thread) + 1};  // FIFO within each tag
            incoming.push_back(std::make_unique<ReceiveBuffer>(size_of(thread, i)));
            mesh.pair(rank, peer).post_recv(requests.add(), tag, incoming.back()->data());
            outgoing.push_back(pattern(seed(rank, thread, i), size_of(thread, i)));
            mesh.pair(rank, peer).post_send(requests.add(), tag, outgoing.back());
          }
          for (Request& request : requests.all()) wait_ok(request);
          for (uint64_t i = 0; i < kMessages; ++i)
            if (!incoming[i]->holds(seed(peer, thread, i))) ++bad;
        } catch (const std::exception& error) {
          std::fprintf(stderr, "rank %d thread %d: %s\n", rank, thread, error.what());
          ++errors;
          mesh.device(rank).abort(std::current_exception());
        }
      });
  for (auto& thread : threads) thread.join();
  REQUIRE(errors == 0);
  REQUIRE(bad == 0);
}

TEST_CASE("transport: a normal job end prints nothing at the default log level", "[transport]") {
  FOR_EACH_TRANSPORT(transport);
  // Redirect stderr into a file around a whole job: create, exchange, destroy.
  const std::string path = cat("/tmp/chorus_transport_quiet_", ::getpid(), ".log");
  const int saved = ::dup(2);
  const int file = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  REQUIRE(file >= 0);
  ::dup2(file, 2);
  {
    Requests requests;
    TestMesh mesh = make_mesh(transport, 3);
    std::vector<Buffer> outgoing;
    std::vector<std::unique_ptr<ReceiveBuffer>> incoming;
    for (int rank = 0; rank < 3; ++rank)
      for (int peer = 0; peer < 3; ++peer) {
        if (peer == rank) continue;
        outgoing.push_back(pattern(static_cast<uint64_t>(rank), 100000));
        mesh.pair(rank, peer).post_send(requests.add(), {1, 1}, outgoing.back());
        incoming.push_back(std::make_unique<ReceiveBuffer>(100000));
        mesh.pair(rank, peer).post_recv(requests.add(), {1, 1}, incoming.back()->data());
      }
    for (Request& request : requests.all()) wait_ok(request);
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
}  // namespace chorus::transport::testing
