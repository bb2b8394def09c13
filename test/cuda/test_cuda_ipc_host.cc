// The cuda_ipc transport's host logic: the descriptor on the wire (and what
// hostile bytes get), the import cache's reuse, replacement and eviction,
// the address, and that a process without CUDA in use does not offer it.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstring>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "transport/cuda_ipc/address.h"
#include "transport/cuda_ipc/descriptor.h"
#include "transport/cuda_ipc/import_cache.h"
#include "transport/registry.h"

using namespace chorus;
using namespace chorus::transport::cuda_ipc;

namespace {

IpcDescriptor sample() {
  IpcDescriptor descriptor;
  for (size_t i = 0; i < descriptor.handle.size(); ++i) descriptor.handle[i] = static_cast<unsigned char>(i * 7);
  descriptor.base = 0x7f0000000000ull;
  descriptor.buffer_id = 42;
  descriptor.allocation_bytes = 1 << 20;
  descriptor.offset = 4096;
  descriptor.length = 65536;
  return descriptor;
}

}  // namespace

TEST_CASE("a descriptor survives the wire", "[cuda][ipc]") {
  const IpcDescriptor sent = sample();
  const auto bytes = encode_descriptor(sent);
  const IpcDescriptor received = decode_descriptor(bytes, 1, 0);
  CHECK(received.handle == sent.handle);
  CHECK(received.base == sent.base);
  CHECK(received.buffer_id == sent.buffer_id);
  CHECK(received.allocation_bytes == sent.allocation_bytes);
  CHECK(received.offset == sent.offset);
  CHECK(received.length == sent.length);
}

TEST_CASE("hostile descriptors are refused naming the peer", "[cuda][ipc]") {
  auto bytes = encode_descriptor(sample());
  SECTION("short") {
    CHECK_THROWS_WITH(decode_descriptor(std::span(bytes).first(100), 1, 3),
                      Catch::Contains("rank 1: cuda_ipc: peer rank 3 sent a malformed buffer descriptor: 100 bytes"));
  }
  SECTION("bad magic") {
    bytes[0] = std::byte{0};
    CHECK_THROWS_WITH(decode_descriptor(bytes, 1, 3), Catch::Contains("bad magic"));
  }
  SECTION("another version") {
    bytes[8] = std::byte{9};
    CHECK_THROWS_WITH(decode_descriptor(bytes, 1, 3), Catch::Contains("version 9"));
  }
  SECTION("a message outside its allocation, however the sums overflow") {
    IpcDescriptor outside = sample();
    outside.offset = (1 << 20) - 10;
    CHECK_THROWS_WITH(decode_descriptor(encode_descriptor(outside), 1, 3),
                      Catch::Contains("does not lie inside its allocation"));
    outside.offset = 8;
    outside.length = ~uint64_t{0} - 4;
    CHECK_THROWS_AS(decode_descriptor(encode_descriptor(outside), 1, 3), IoError);
    outside.offset = ~uint64_t{0};
    outside.length = 2;
    CHECK_THROWS_AS(decode_descriptor(encode_descriptor(outside), 1, 3), IoError);
  }
}

TEST_CASE("the import cache opens an allocation once and replaces a reallocated one", "[cuda][ipc]") {
  std::vector<std::unique_ptr<std::byte[]>> mappings;
  std::vector<std::byte*> closed;
  ImportCache cache(
      [&](const IpcDescriptor&) {
        mappings.push_back(std::make_unique<std::byte[]>(16));
        return mappings.back().get();
      },
      [&](std::byte* local) { closed.push_back(local); }, 2);
  IpcDescriptor a = sample();
  std::byte* first = cache.map(0, a);
  CHECK(cache.map(0, a) == first);  // reused
  CHECK(cache.opened() == 1);
  // Another peer at the same address is another allocation.
  std::byte* other_peer = cache.map(1, a);
  CHECK(other_peer != first);
  CHECK(cache.opened() == 2);
  // Freed and reallocated at the same base: the old mapping is closed, never reused.
  IpcDescriptor again = a;
  again.buffer_id = 43;
  std::byte* fresh = cache.map(0, again);
  CHECK(fresh != first);
  REQUIRE(closed.size() == 1);
  CHECK(closed[0] == first);
  CHECK(cache.size() == 2);
  // A third allocation evicts the least recently used (peer 1's).
  IpcDescriptor third = a;
  third.base += 1 << 20;
  cache.map(0, third);
  CHECK(cache.size() == 2);
  REQUIRE(closed.size() == 2);
  CHECK(closed[1] == other_peer);
  cache.forget(0);
  CHECK(cache.size() == 0);
  CHECK(closed.size() == 4);
}

TEST_CASE("a cuda_ipc address carries the process and the inner address", "[cuda][ipc]") {
  const std::vector<std::byte> inner = {std::byte{1}, std::byte{2}, std::byte{3}};
  const std::vector<std::byte> address = wrap_address(1234, inner);
  REQUIRE(inner_address(address));
  CHECK(std::vector<std::byte>(inner_address(address)->begin(), inner_address(address)->end()) == inner);
  CHECK(process_of(address) == 1234);
  CHECK_FALSE(inner_address({}));
  CHECK(process_of({}) == 0);
  std::vector<std::byte> damaged = address;
  damaged[0] = std::byte{'x'};
  CHECK_FALSE(inner_address(damaged));
}

TEST_CASE("without CUDA in use, cuda_ipc offers nothing and connects nobody", "[cuda][ipc]") {
  const transport::TransportEntry* entry = transport::find_transport("cuda_ipc");
  REQUIRE(entry);
  transport::DeviceOptions options;
  options.config = Config::from_environment();
  options.config.transports.clear();
  // Another case of this program may have loaded the driver (on a machine
  // with one): then there is nothing to check here.
  if (void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
    ::dlclose(driver);
    WARN("the CUDA driver is loaded in this process; the GPU suite covers cuda_ipc");
    return;
  }
  auto device = entry->create(options);
  CHECK(device->address().empty());
  const transport::PeerView me{0, 1, {}};
  const transport::PeerView them{1, 1, {}};
  CHECK_FALSE(entry->can_connect(me, them));
}
