// The pinned-chunk pipeline that moves device memory over tcp and shm
// (transport/host_staging/host_staging.h), over real sockets and shared
// memory. No GPU here: host memory plays the device's part, through a
// copier that memcpys and counts; the chunking, the order of chunks, the
// pools, mismatches and aborts are the transport's own code.
#include <atomic>
#include <cstring>
#include <deque>

#include "test/transport/conformance.h"
#include "transport/host_staging/host_staging.h"

namespace chorus::transport::testing {
namespace {

class CountingCopier final : public host_staging::Copier {
 public:
  std::byte* allocate_pinned(size_t bytes) override {
    ++allocated;
    return new std::byte[bytes];
  }
  void free_pinned(std::byte* data) override {
    ++freed;
    delete[] data;
  }
  // Called on the staging worker's thread too: no Catch2 assertion here
  // (it is not thread-safe); the test checks the count of wrong devices.
  void copy(std::byte* to, const std::byte* from, size_t bytes, int device) override {
    if (device != 3) ++wrong_device;
    std::memcpy(to, from, bytes);
    ++copies;
  }
  std::atomic<int> allocated{0}, freed{0}, copies{0}, wrong_device{0};
};

// Small chunks, so modest messages take many and the pools run dry.
constexpr host_staging::StagingOptions kOptions{.chunk_bytes = 4096, .chunks_per_message = 3, .pool_chunks = 6};
constexpr Memory kDevice = Memory::cuda(3);

TestMesh staged_mesh(const std::string& transport, const std::shared_ptr<CountingCopier>& copier) {
  TestMesh mesh;
  for (auto& device : make_devices(transport, 2))
    mesh.devices.push_back(host_staging::wrap(std::move(device), MemoryKind::cuda, copier, kOptions));
  connect_mesh(mesh);
  // As ranks asleep in a wait: the transports' threads (and the staging
  // workers) do the work.
  for (auto& device : mesh.devices) mesh.sleepers.push_back(std::make_unique<WaitingScope<Device>>(*device));
  return mesh;
}

void wait(Request& request) { request.wait(Deadline::after(20s), "staged message"); }

Tag tag_of(uint64_t value) { return Tag{value, 0x51, 7}; }

}  // namespace

TEST_CASE("device memory crosses tcp and shm in pinned chunks, intact", "[cuda][staging]") {
  const std::string transport = GENERATE(as<std::string>{}, "tcp", "shm");
  INFO(transport);
  auto copier = std::make_shared<CountingCopier>();
  {
    TestMesh mesh = staged_mesh(transport, copier);
    CHECK(mesh.device(0).accepts(kDevice));
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4096}, size_t{4097}, size_t{100'003}}) {
      INFO(bytes << " bytes");
      CompletionSignal signal;
      Request send, receive;
      send.attach(&signal);
      receive.attach(&signal);
      Buffer sent = pattern(bytes, bytes);
      ReceiveBuffer received(bytes);
      const int copies_before = copier->copies;
      mesh.pair(1, 0).post_recv(receive, tag_of(bytes), received.data(), kDevice);
      mesh.pair(0, 1).post_send(send, tag_of(bytes), sent, kDevice);
      wait(send);
      wait(receive);
      CHECK(received.holds(bytes));
      // One copy out and one copy in per chunk (an empty message is one empty chunk).
      const int chunks = static_cast<int>(std::max<size_t>(1, (bytes + 4095) / 4096));
      CHECK(copier->copies - copies_before == 2 * chunks);
    }
    // Host memory goes straight through.
    CompletionSignal signal;
    Request send, receive;
    send.attach(&signal);
    receive.attach(&signal);
    Buffer sent = pattern(9, 50'000);
    ReceiveBuffer received(50'000);
    const int copies_before = copier->copies;
    mesh.pair(0, 1).post_recv(receive, tag_of(1), received.data());
    mesh.pair(1, 0).post_send(send, tag_of(1), sent);
    wait(send);
    wait(receive);
    CHECK(received.holds(9));
    CHECK(copier->copies == copies_before);
  }
  CHECK(copier->wrong_device == 0);
  // Each device's pool was allocated with its first device message and freed with it.
  CHECK(copier->allocated == 12);
  CHECK(copier->freed == 12);
}

TEST_CASE("many staged messages both ways share the pools without deadlock", "[cuda][staging]") {
  const std::string transport = GENERATE(as<std::string>{}, "tcp", "shm");
  INFO(transport);
  auto copier = std::make_shared<CountingCopier>();
  TestMesh mesh = staged_mesh(transport, copier);
  constexpr int kMessages = 8;
  constexpr size_t kBytes = 50'000;  // 13 chunks each, pools of 3 per direction
  CompletionSignal signal;
  std::vector<Request> requests(4 * kMessages);
  for (Request& request : requests) request.attach(&signal);
  std::vector<Buffer> sent;
  std::deque<ReceiveBuffer> received;
  for (int i = 0; i < 2 * kMessages; ++i) {
    sent.push_back(pattern(static_cast<uint64_t>(i), kBytes));
    received.emplace_back(kBytes);
  }
  // Receives first on both sides, holding every receive chunk, then sends.
  for (int i = 0; i < kMessages; ++i) {
    mesh.pair(1, 0).post_recv(requests[static_cast<size_t>(4 * i)], tag_of(static_cast<uint64_t>(i)),
                              received[static_cast<size_t>(i)].data(), kDevice);
    mesh.pair(0, 1).post_recv(requests[static_cast<size_t>(4 * i + 1)], tag_of(static_cast<uint64_t>(100 + i)),
                              received[static_cast<size_t>(kMessages + i)].data(), kDevice);
  }
  for (int i = 0; i < kMessages; ++i) {
    mesh.pair(0, 1).post_send(requests[static_cast<size_t>(4 * i + 2)], tag_of(static_cast<uint64_t>(i)),
                              sent[static_cast<size_t>(i)], kDevice);
    mesh.pair(1, 0).post_send(requests[static_cast<size_t>(4 * i + 3)], tag_of(static_cast<uint64_t>(100 + i)),
                              sent[static_cast<size_t>(kMessages + i)], kDevice);
  }
  for (Request& request : requests) wait(request);
  for (int i = 0; i < 2 * kMessages; ++i)
    CHECK(received[static_cast<size_t>(i)].holds(static_cast<uint64_t>(i)));
}

TEST_CASE("a staged message of the wrong length fails, naming the mismatch", "[cuda][staging]") {
  auto copier = std::make_shared<CountingCopier>();
  TestMesh mesh = staged_mesh("tcp", copier);
  CompletionSignal signal;
  Request send, receive;
  send.attach(&signal);
  receive.attach(&signal);
  Buffer sent = pattern(1, 10'000);
  ReceiveBuffer received(9'000);
  mesh.pair(1, 0).post_recv(receive, tag_of(5), received.data(), kDevice);
  mesh.pair(0, 1).post_send(send, tag_of(5), sent, kDevice);
  CHECK_THROWS_AS(wait(receive), MismatchError);
  CHECK(mesh.device(1).failure());
  // The send ends either way (its chunks are eager, or the peer's abort
  // fails them); it must end before the request goes.
  try {
    wait(send);
  } catch (const Error&) {
  }
}

TEST_CASE("aborting fails staged messages in flight and later ones", "[cuda][staging]") {
  auto copier = std::make_shared<CountingCopier>();
  TestMesh mesh = staged_mesh("tcp", copier);
  CompletionSignal signal;
  Request receive, later;
  receive.attach(&signal);
  later.attach(&signal);
  ReceiveBuffer received(30'000);
  mesh.pair(1, 0).post_recv(receive, tag_of(6), received.data(), kDevice);
  mesh.device(1).abort(std::make_exception_ptr(Aborted("test abort")));
  CHECK(receive.state() == Request::State::failed);
  CHECK_THROWS_WITH(wait(receive), Catch::Contains("test abort"));
  mesh.pair(1, 0).post_recv(later, tag_of(7), received.data(), kDevice);
  CHECK_THROWS_WITH(wait(later), Catch::Contains("test abort"));
}

}  // namespace chorus::transport::testing
