// The registration cache (transport/registration.h), with a registrar that
// records what it was asked: reuse by containment, the LRU bound that never
// drops a registration a message still holds, invalidation, and find().
#include <catch2/catch.hpp>

#include <vector>

#include "transport/registration.h"

namespace chorus::transport {
namespace {

class RecordingRegistrar final : public Registrar {
 public:
  std::shared_ptr<Registration> register_range(const std::byte* address, size_t bytes, Memory memory) override {
    ++registered;
    return std::make_shared<Registration>(address, bytes, memory);
  }
  int registered = 0;
};

}  // namespace

TEST_CASE("registration cache: a range inside a cached one is a hit, anything else registers", "[registration]") {
  RecordingRegistrar registrar;
  RegistrationCache cache(registrar, 8);
  std::vector<std::byte> buffer(1 << 16);
  auto whole = cache.acquire(buffer.data(), buffer.size(), Memory::host());
  CHECK(registrar.registered == 1);
  auto inside = cache.acquire(buffer.data() + 100, 1000, Memory::host());
  CHECK(inside == whole);
  CHECK(registrar.registered == 1);
  CHECK(cache.hits() == 1);
  // Reaching one byte past the end is not covered.
  auto past = cache.acquire(buffer.data() + 100, buffer.size() - 99, Memory::host());
  CHECK(past != whole);
  CHECK(registrar.registered == 2);
  // Another memory kind never matches host memory at the same address.
  auto device = cache.acquire(buffer.data(), 10, Memory::cuda(0));
  CHECK(device != whole);
  CHECK(registrar.registered == 3);
}

TEST_CASE("registration cache: least recently used entries go first, never one still held", "[registration]") {
  RecordingRegistrar registrar;
  RegistrationCache cache(registrar, 2);
  std::vector<std::byte> a(100), b(100), c(100);
  auto held = cache.acquire(a.data(), a.size(), Memory::host());  // held throughout
  cache.acquire(b.data(), b.size(), Memory::host());
  cache.acquire(c.data(), c.size(), Memory::host());  // over capacity: b goes, a is held
  CHECK(cache.size() == 2);
  CHECK(cache.find(a.data(), a.size(), Memory::host()) == held);
  CHECK(cache.find(b.data(), b.size(), Memory::host()) == nullptr);
  CHECK(cache.find(c.data(), c.size(), Memory::host()) != nullptr);
  CHECK(registrar.registered == 3);
}

TEST_CASE("registration cache: invalidate forgets every overlapping range; find never registers", "[registration]") {
  RecordingRegistrar registrar;
  RegistrationCache cache(registrar, 8);
  std::vector<std::byte> buffer(4096);
  auto first = cache.acquire(buffer.data(), 1024, Memory::host());
  auto second = cache.acquire(buffer.data() + 2048, 1024, Memory::host());
  cache.invalidate(buffer.data() + 1000, 100);  // overlaps the first only
  CHECK(cache.find(buffer.data(), 10, Memory::host()) == nullptr);
  CHECK(cache.find(buffer.data() + 2048, 10, Memory::host()) == second);
  CHECK(registrar.registered == 2);
  // The invalidated registration stays valid for whoever still holds it.
  CHECK(first->covers(buffer.data(), 1024));
}

}  // namespace chorus::transport
