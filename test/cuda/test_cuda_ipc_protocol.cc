// The cuda_ipc protocol (transport/cuda_ipc/device.cc) over a real shm
// pair, without a GPU: host memory plays device memory, "exporting" an
// allocation hands out its address and "opening" returns it. What runs is
// the transport's own code: descriptors, the import cache, copies into the
// receiver's buffer, acks, eager copies, mismatches and aborts.
#include <cstring>
#include <mutex>

#include "test/transport/conformance.h"
#include "test/cuda/host_ipc_memory.h"
#include "transport/cuda_ipc/cuda_ipc.h"

namespace chorus::transport::testing {
namespace {

constexpr Memory kIpcDevice = Memory::cuda(2);

TestMesh ipc_mesh(const std::shared_ptr<HostIpcMemory>& memory) {
  TestMesh mesh;
  int rank = 0;
  for (auto& device : make_devices("shm", 2)) mesh.devices.push_back(cuda_ipc::wrap(rank++, std::move(device), memory));
  connect_mesh(mesh);
  for (auto& device : mesh.devices) mesh.sleepers.push_back(std::make_unique<WaitingScope<Device>>(*device));
  return mesh;
}

Tag ipc_tag(uint64_t value) { return Tag{value, 0x77, 3}; }

void wait_ipc(Request& request) { request.wait(Deadline::after(20s), "cuda_ipc message"); }

// A send and a receive of `bytes` from `source` (inside an allocation) into a fresh buffer.
std::vector<std::byte> exchange(TestMesh& mesh, const std::byte* source, size_t bytes, uint64_t tag) {
  CompletionSignal signal;
  Request send, receive;
  send.attach(&signal);
  receive.attach(&signal);
  std::vector<std::byte> received(bytes, std::byte{0x5a});
  mesh.pair(1, 0).post_recv(receive, ipc_tag(tag), received, kIpcDevice);
  mesh.pair(0, 1).post_send(send, ipc_tag(tag), {source, bytes}, kIpcDevice);
  wait_ipc(receive);
  wait_ipc(send);
  return received;
}

}  // namespace

TEST_CASE("cuda_ipc: the receiver copies out of the sender's opened allocation, once opened", "[cuda][ipc]") {
  auto memory = std::make_shared<HostIpcMemory>();
  TestMesh mesh = ipc_mesh(memory);
  CHECK(mesh.device(0).accepts(kIpcDevice));
  std::byte* buffer = memory->make(1 << 20);
  fill_pattern({buffer, size_t{1} << 20}, 11);
  // A message in the middle of the allocation, twice: one open, two copies.
  for (uint64_t round = 0; round < 2; ++round) {
    const std::vector<std::byte> received = exchange(mesh, buffer + 4096, 100'003, round);
    CHECK(std::memcmp(received.data(), buffer + 4096, received.size()) == 0);
  }
  CHECK(memory->opens == 1);
  CHECK(memory->copies == 2);
  // Freed and allocated again at the same address: opened anew, the old mapping closed.
  memory->renew(buffer);
  fill_pattern({buffer, size_t{1} << 20}, 12);
  const std::vector<std::byte> fresh = exchange(mesh, buffer, 5000, 7);
  CHECK(std::memcmp(fresh.data(), buffer, fresh.size()) == 0);
  CHECK(memory->opens == 2);
  CHECK(memory->closes == 1);
  // An empty message opens nothing.
  CHECK(exchange(mesh, buffer, 0, 8).empty());
  CHECK(memory->opens == 2);
  // Host memory goes through the shm pair as it is.
  const std::vector<std::byte> host(300, std::byte{9});
  CompletionSignal signal;
  Request send, receive;
  send.attach(&signal);
  receive.attach(&signal);
  std::vector<std::byte> landed(300);
  mesh.pair(0, 1).post_recv(receive, ipc_tag(9), landed);
  mesh.pair(1, 0).post_send(send, ipc_tag(9), host);
  wait_ipc(receive);
  wait_ipc(send);
  CHECK(landed == host);
  CHECK(memory->copies == 3);
}

TEST_CASE("cuda_ipc: an eager send completes before the receive, from a copy", "[cuda][ipc]") {
  auto memory = std::make_shared<HostIpcMemory>();
  TestMesh mesh = ipc_mesh(memory);
  std::byte* buffer = memory->make(4000);
  fill_pattern({buffer, 4000}, 21);
  std::vector<std::byte> expected(buffer, buffer + 4000);
  CompletionSignal signal;
  Request send, receive;
  send.attach(&signal);
  receive.attach(&signal);
  Tag eager = ipc_tag(1);
  eager.eager = true;
  mesh.pair(0, 1).post_send(send, eager, {buffer, 4000}, kIpcDevice);
  wait_ipc(send);  // no receive posted yet
  std::memset(buffer, 0, 4000);  // the caller may reuse its buffer at once
  std::vector<std::byte> received(4000);
  mesh.pair(1, 0).post_recv(receive, ipc_tag(1), received, kIpcDevice);
  wait_ipc(receive);
  CHECK(received == expected);
}

TEST_CASE("cuda_ipc: a device message of the wrong length fails before a byte lands", "[cuda][ipc]") {
  auto memory = std::make_shared<HostIpcMemory>();
  TestMesh mesh = ipc_mesh(memory);
  std::byte* buffer = memory->make(10'000);
  CompletionSignal signal;
  Request send, receive;
  send.attach(&signal);
  receive.attach(&signal);
  std::vector<std::byte> received(9'000, std::byte{0x5a});
  mesh.pair(1, 0).post_recv(receive, ipc_tag(4), received, kIpcDevice);
  mesh.pair(0, 1).post_send(send, ipc_tag(4), {buffer, 10'000}, kIpcDevice);
  try {
    wait_ipc(receive);
    FAIL("a short receive took a longer message");
  } catch (const MismatchError& error) {
    CHECK_THAT(error.what(), Catch::Contains("rank 1: cuda_ipc: peer rank 0 sent 10000 bytes of device memory"));
    CHECK_THAT(error.what(), Catch::Contains("the receive expects 9000"));
  }
  CHECK(received == std::vector<std::byte>(9'000, std::byte{0x5a}));
  CHECK(memory->copies == 0);
  // The sender's send fails too (its ack will not come): it must end
  // before the request goes (the caller keeps a request until it finishes).
  CHECK_THROWS(wait_ipc(send));
}

TEST_CASE("cuda_ipc: aborting fails device messages in flight and later ones", "[cuda][ipc]") {
  auto memory = std::make_shared<HostIpcMemory>();
  TestMesh mesh = ipc_mesh(memory);
  CompletionSignal signal;
  Request receive, later;
  receive.attach(&signal);
  later.attach(&signal);
  std::vector<std::byte> received(1000);
  mesh.pair(1, 0).post_recv(receive, ipc_tag(5), received, kIpcDevice);
  mesh.device(1).abort(std::make_exception_ptr(Aborted("test abort")));
  CHECK(receive.state() == Request::State::failed);
  mesh.pair(1, 0).post_recv(later, ipc_tag(6), received, kIpcDevice);
  CHECK_THROWS_WITH(wait_ipc(later), Catch::Contains("test abort"));
}

}  // namespace chorus::transport::testing
