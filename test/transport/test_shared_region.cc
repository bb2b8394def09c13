// Device::create_shared_region / open_shared_region (transport/transport.h):
// the memory of a host's board. The shm transport shares a memfd; a peer
// opens it from the creator's description, which is checked against what
// the creator's rank published (its pid) and against the region itself (a
// nonce in its first line), so a forged or stale description is an error
// naming the peer. Transports that share no memory say so with null.
#include <cstring>

#include "base/little_endian.h"
#include "test/transport/conformance.h"

namespace chorus::transport::testing {
namespace {

// Rank 1's device, having checked rank 0's published address (what connect
// does before anything else), and rank 0's.
struct TwoDevices {
  explicit TwoDevices(const std::string& transport) {
    devices = make_devices(transport, 2, default_options());
    devices[1]->check_peer(0, devices[0]->address());
    devices[0]->check_peer(1, devices[1]->address());
  }
  std::vector<std::unique_ptr<Device>> devices;
};

std::string open_error(Device& device, std::span<const std::byte> description, size_t bytes) {
  try {
    device.open_shared_region(0, description, bytes);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST_CASE("shared regions: what one rank writes the other reads, and a forged description is refused",
          "[shared_region]") {
  for (const std::string& transport : transports_under_test()) {
    CAPTURE(transport);
    TwoDevices two(transport);
    std::unique_ptr<SharedRegion> region = two.devices[0]->create_shared_region(4096);
    if (!region) {
      CHECK(transport != "shm");  // tcp and ibverbs share no memory; cuda_ipc's shm does
      continue;
    }
    CHECK(region->size() == 4096);
    CHECK(reinterpret_cast<uintptr_t>(region->data()) % 64 == 0);
    const std::vector<std::byte> description = region->description();
    REQUIRE(description.size() <= kMaxExportedMemoryBytes);

    std::unique_ptr<SharedRegion> opened = two.devices[1]->open_shared_region(0, description, 4096);
    REQUIRE(opened);
    std::memcpy(region->data() + 100, "board", 5);
    CHECK(std::memcmp(opened->data() + 100, "board", 5) == 0);

    // Another size than described; a cut description; another pid; another nonce.
    CHECK_THAT(open_error(*two.devices[1], description, 8192),
               Catch::Contains("rank 1: the shared region rank 0 described") && Catch::Contains("4096 bytes"));
    CHECK_THAT(open_error(*two.devices[1], std::span(description).first(10), 4096),
               Catch::Contains("rank 1") && Catch::Contains("rank 0"));
    std::vector<std::byte> other_pid = description;
    store_le(other_pid.data() + 4, load_le(other_pid.data() + 4, 4) + 1, 4);
    CHECK_THAT(open_error(*two.devices[1], other_pid, 4096), Catch::Contains("but rank 0 published pid"));
    std::vector<std::byte> other_nonce = description;
    other_nonce[20] ^= std::byte{1};
    CHECK_THAT(open_error(*two.devices[1], other_nonce, 4096), Catch::Contains("rank 0 described"));

    // Sealed: what is mapped stays, and the memory lives while anyone maps it.
    region->seal();
    region.reset();
    CHECK(std::memcmp(opened->data() + 100, "board", 5) == 0);
  }
}

TEST_CASE("shared regions: a rank whose address was never checked cannot be trusted with one", "[shared_region]") {
  for (const std::string& transport : transports_under_test()) {
    auto devices = make_devices(transport, 3, default_options());
    std::unique_ptr<SharedRegion> region = devices[0]->create_shared_region(64);
    if (!region) continue;
    // Rank 2 never checked rank 0's published address: no pid to compare.
    CHECK_THAT(open_error(*devices[2], region->description(), 64), Catch::Contains("published no pid"));
  }
}

}  // namespace
}  // namespace chorus::transport::testing
