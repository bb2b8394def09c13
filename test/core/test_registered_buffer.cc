// chorus::register_buffer (chorus/registered_buffer.h): a caller's buffer on
// the long-lived list while its handle lives, retired (every transport's pin
// dropped) when the last handle for it goes, and refusals that say why. The
// pins themselves are checked in the Soft-RoCE VM
// (test/ibverbs/test_ibverbs_registration.cc).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/long_lived_memory.h"
#include "chorus/registered_buffer.h"

using namespace chorus;

namespace {

class RetirementLog final : public LongLivedMemoryListener {
 public:
  RetirementLog() { long_lived_memory::add_listener(this); }
  ~RetirementLog() override { long_lived_memory::remove_listener(this); }
  void retiring(MemoryRange range) override { retired.push_back(range); }
  std::vector<MemoryRange> retired;
};

bool listed(const void* address, size_t bytes) {
  return long_lived_memory::with_range_containing(static_cast<const std::byte*>(address), bytes, [](MemoryRange) {});
}

std::string refusal(const void* data, size_t bytes) {
  try {
    RegisteredBuffer buffer = register_buffer(data, bytes);
  } catch (const InvalidArgument& error) {
    return error.what();
  }
  return "(registered)";
}

}  // namespace

TEST_CASE("register_buffer: listed while the handle lives and retired once when it goes", "[registered_buffer]") {
  std::vector<std::byte> memory(8192);
  RetirementLog log;
  {
    RegisteredBuffer buffer = register_buffer(memory.data(), memory.size());
    CHECK(buffer.registered());
    CHECK(buffer.data() == memory.data());
    CHECK(buffer.bytes() == memory.size());
    CHECK(listed(memory.data() + 100, 4000));
    CHECK_FALSE(listed(memory.data() + 8000, 400));  // runs past its end
    CHECK(log.retired.empty());
  }
  REQUIRE(log.retired.size() == 1);
  CHECK(log.retired[0].start == memory.data());
  CHECK(log.retired[0].bytes == memory.size());
  CHECK_FALSE(listed(memory.data(), 1));
}

TEST_CASE("register_buffer: the same buffer twice counts twice; the last handle retires it", "[registered_buffer]") {
  std::vector<std::byte> memory(4096);
  RetirementLog log;
  RegisteredBuffer first = register_buffer(memory.data(), memory.size());
  RegisteredBuffer second = register_buffer(memory.data(), memory.size());
  first.reset();
  CHECK_FALSE(first.registered());
  CHECK(log.retired.empty());
  CHECK(listed(memory.data(), memory.size()));
  first.reset();  // twice is harmless
  CHECK(log.retired.empty());
  second.reset();
  CHECK(log.retired.size() == 1);
  CHECK_FALSE(listed(memory.data(), 1));
}

TEST_CASE("register_buffer: moving hands the registration over; assigning over one retires it",
          "[registered_buffer]") {
  std::vector<std::byte> a(4096), b(4096);
  RetirementLog log;
  RegisteredBuffer one = register_buffer(a.data(), a.size());
  RegisteredBuffer moved = std::move(one);
  CHECK_FALSE(one.registered());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  CHECK(moved.registered());
  CHECK(log.retired.empty());
  moved = register_buffer(b.data(), b.size());
  REQUIRE(log.retired.size() == 1);
  CHECK(log.retired[0].start == a.data());
  CHECK(listed(b.data(), b.size()));
  CHECK_FALSE(listed(a.data(), 1));
}

TEST_CASE("register_buffer: overlaps and bad ranges are refused, naming the ranges", "[registered_buffer]") {
  std::vector<std::byte> memory(8192);
  RegisteredBuffer middle = register_buffer(memory.data() + 1024, 2048);
  // Inside, around, across either end: one lookup by address must find one range.
  for (auto [offset, bytes] : {std::pair<size_t, size_t>{1024, 1024}, {2048, 64}, {0, 8192}, {512, 1024},
                               {3000, 1000}, {1024, 4096}}) {
    INFO("offset " << offset << ", " << bytes << " bytes");
    const std::string message = refusal(memory.data() + offset, bytes);
    CHECK(message.find("overlaps") != std::string::npos);
    CHECK(message.find("registered already") != std::string::npos);
  }
  // Touching is not overlapping.
  RegisteredBuffer before = register_buffer(memory.data(), 1024);
  RegisteredBuffer after = register_buffer(memory.data() + 3072, 1024);
  CHECK(before.registered());
  CHECK(after.registered());

  CHECK(refusal(nullptr, 64).find("null pointer") != std::string::npos);
  CHECK(refusal(memory.data(), 0).find("0 bytes") != std::string::npos);
  CHECK(refusal(memory.data(), SIZE_MAX).find("past the end of the address space") != std::string::npos);
}
