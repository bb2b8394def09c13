// Which memory the verbs transport pins once and which once per message
// (inside rxe-run only: test/ibverbs/in_vm.sh; Soft-RoCE has no on-demand
// paging, which is the case these rules are for). chorus's own long-lived
// memory (the executor's scratch, base/long_lived_memory.h) and a caller's
// buffer registered with chorus::register_buffer are pinned whole on first
// use and kept; any other caller's buffer is pinned for each message; and a
// retired range's pin is gone before its memory is, so a new mapping at the
// same address sends and receives its own bytes, not the old pages'.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <cstring>

#include "base/long_lived_memory.h"
#include "chorus/registered_buffer.h"
#include "memory/host/host_memory.h"
#include "test/transport/conformance.h"
#include "transport/ibverbs/ibverbs.h"

namespace chorus::transport::testing {
namespace {

// Large enough to be written straight into the receive buffer (not through
// the receive slots), so both sides register the message's memory.
constexpr size_t kMessageBytes = 1 << 20;

class Exchange {
 public:
  explicit Exchange(TestMesh& mesh) : mesh_(mesh) {}

  // One message from rank 0 to rank 1; true when it arrived intact.
  bool send(std::span<const std::byte> from, std::span<std::byte> into) {
    Request& recv = requests_.add();
    Request& send = requests_.add();
    const Tag tag{.value = ++number_, .signature = 7};
    mesh_.pair(1, 0).post_recv(recv, tag, into);
    mesh_.pair(0, 1).post_send(send, tag, from);
    wait_ok(recv);
    wait_ok(send);
    return std::memcmp(from.data(), into.data(), from.size()) == 0;
  }

  // Registrations the exchange made, beyond those counted at construction.
  uint64_t registrations() const { return ibverbs::memory_regions_registered() - start_; }
  void restart_count() { start_ = ibverbs::memory_regions_registered(); }

 private:
  TestMesh& mesh_;
  Requests requests_;
  uint32_t number_ = 0;
  uint64_t start_ = ibverbs::memory_regions_registered();
};

// Anonymous pages at a fixed address, so the test can free memory and map
// new pages exactly where the old ones were.
std::byte* map_pages(std::byte* at, size_t bytes) {
  void* mapped = ::mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
  REQUIRE(mapped != MAP_FAILED);
  return static_cast<std::byte*>(mapped);
}

}  // namespace

TEST_CASE("ibverbs: the executor's scratch and registered buffers are pinned once; other buffers once per message",
          "[ibverbs]") {
  TestMesh mesh = make_mesh("ibverbs", 2);
  Exchange exchange(mesh);

  SECTION("scratch: one pin per device, then none") {
    std::byte* scratch = host_memory_backend().thread_scratch(4 * kMessageBytes);
    const std::span<const std::byte> from(scratch, kMessageBytes);
    const std::span<std::byte> into(scratch + 2 * kMessageBytes, kMessageBytes);
    fill_pattern({scratch, kMessageBytes}, 1);
    CHECK(exchange.send(from, into));
    // Each device pinned the whole scratch: the sender's and the receiver's.
    CHECK(exchange.registrations() == 2);
    for (uint64_t seed = 2; seed < 12; ++seed) {
      fill_pattern({scratch, kMessageBytes}, seed);
      CHECK(exchange.send(from, into));
    }
    CHECK(exchange.registrations() == 2);

    // A larger call grows the scratch: the old buffer is retired, the new
    // one pinned once more by each device.
    std::byte* grown = host_memory_backend().thread_scratch(8 * kMessageBytes);
    exchange.restart_count();
    for (uint64_t seed = 20; seed < 25; ++seed) {
      fill_pattern({grown, kMessageBytes}, seed);
      CHECK(exchange.send({grown, kMessageBytes}, {grown + 4 * kMessageBytes, kMessageBytes}));
    }
    CHECK(exchange.registrations() == 2);
  }

  SECTION("a caller's registered buffers: one pin per device, then none; unpinned with the handle") {
    Buffer from = pattern(5, kMessageBytes);
    Buffer into(kMessageBytes);
    {
      const RegisteredBuffer sending = register_buffer(from.data(), from.size());
      const RegisteredBuffer receiving = register_buffer(into.data(), into.size());
      for (int message = 0; message < 6; ++message) CHECK(exchange.send(from, into.bytes()));
      CHECK(exchange.registrations() == 2);
    }
    // Deregistered: back to a pin per message on each side.
    exchange.restart_count();
    CHECK(exchange.send(from, into.bytes()));
    CHECK(exchange.registrations() == 2);
    CHECK(exchange.send(from, into.bytes()));
    CHECK(exchange.registrations() == 4);
  }

  SECTION("a caller's buffer: pinned for each message") {
    Buffer from = pattern(3, kMessageBytes);
    Buffer into(kMessageBytes);
    constexpr uint64_t kMessages = 4;
    for (uint64_t message = 0; message < kMessages; ++message) CHECK(exchange.send(from, into.bytes()));
    CHECK(exchange.registrations() == 2 * kMessages);
  }
}

TEST_CASE("ibverbs: a deregistered buffer's pin goes before its memory; new pages at the address move their own bytes",
          "[ibverbs]") {
  TestMesh mesh = make_mesh("ibverbs", 2);
  Exchange exchange(mesh);
  constexpr size_t kBytes = 4 * kMessageBytes;
  std::byte* pages = map_pages(nullptr, kBytes);
  RegisteredBuffer registration = register_buffer(pages, kBytes);
  fill_pattern({pages, kMessageBytes}, 31);
  CHECK(exchange.send({pages, kMessageBytes}, {pages + 2 * kMessageBytes, kMessageBytes}));
  CHECK(exchange.registrations() == 2);

  // Freed and mapped again at the same address: new pages. A pin kept past
  // the retirement would still point the NIC at the old ones: the receiver
  // would see the old bytes, and what arrived would land where nobody looks.
  registration.reset();
  REQUIRE(::munmap(pages, kBytes) == 0);
  REQUIRE(map_pages(pages, kBytes) == pages);
  registration = register_buffer(pages, kBytes);
  fill_pattern({pages, kMessageBytes}, 32);
  std::memset(pages + 2 * kMessageBytes, 0, kMessageBytes);
  CHECK(exchange.send({pages, kMessageBytes}, {pages + 2 * kMessageBytes, kMessageBytes}));
  CHECK(first_mismatch({pages + 2 * kMessageBytes, kMessageBytes}, 32) == kMessageBytes);
  CHECK(exchange.registrations() == 4);

  registration.reset();
  REQUIRE(::munmap(pages, kBytes) == 0);
}

}  // namespace chorus::transport::testing
