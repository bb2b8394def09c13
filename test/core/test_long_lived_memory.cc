// Long-lived memory (base/long_lived_memory.h) and the host backend's
// scratch, which is the memory on that list: announced while it lives,
// retired before it is freed (when it grows and when its thread exits), so
// that a transport's pin of it can never outlive it. Under ASan a listener
// that touches the range after the free would fail the test.
#include <catch2/catch.hpp>

#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "base/long_lived_memory.h"
#include "memory/host/host_memory.h"

using namespace chorus;

namespace {

// Remembers every retired range, after writing every byte of it: the
// range must still be allocated while listeners run.
class RecordingListener final : public LongLivedMemoryListener {
 public:
  RecordingListener() { long_lived_memory::add_listener(this); }
  ~RecordingListener() override { long_lived_memory::remove_listener(this); }
  void retiring(MemoryRange range) override {
    std::memset(const_cast<std::byte*>(range.start), 0x7e, range.bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    retired_.push_back(range);
  }
  std::vector<MemoryRange> retired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return retired_;
  }

 private:
  std::mutex mutex_;
  std::vector<MemoryRange> retired_;
};

// The announced range holding [address, address + bytes), or an empty one.
MemoryRange range_holding(const std::byte* address, size_t bytes) {
  MemoryRange found;
  long_lived_memory::with_range_containing(address, bytes, [&](MemoryRange range) { found = range; });
  return found;
}

bool same(const MemoryRange& a, const MemoryRange& b) { return a.start == b.start && a.bytes == b.bytes; }

}  // namespace

TEST_CASE("long-lived memory: a thread's scratch is announced while it lives and retired before it is freed") {
  RecordingListener listener;
  const size_t before = long_lived_memory::announced_ranges();
  MemoryRange first, second;
  size_t retired_while_running = 0;
  bool found_inside = false, found_outside = false, found_past_end = false, reused = false;
  std::thread worker([&] {
    MemoryBackend& host = host_memory_backend();
    std::byte* small = host.thread_scratch(1000);
    first = range_holding(small + 10, 100);
    found_inside = same(first, {small, 1000});
    found_past_end = long_lived_memory::with_range_containing(small + 990, 20, [](MemoryRange) {});
    std::byte local[16];
    found_outside = long_lived_memory::with_range_containing(local, sizeof local, [](MemoryRange) {});
    // Growing retires the old buffer first; a smaller call reuses the new one.
    std::byte* large = host.thread_scratch(5000);
    second = range_holding(large, 5000);
    reused = host.thread_scratch(500) == large;
    retired_while_running = listener.retired().size();
  });
  worker.join();

  CHECK(found_inside);
  CHECK_FALSE(found_past_end);
  CHECK_FALSE(found_outside);
  CHECK(same(second, {second.start, 5000}));
  CHECK(reused);
  const std::vector<MemoryRange> retired = listener.retired();
  // The growth retired the first buffer; the thread's exit, the second.
  CHECK(retired_while_running == 1);
  REQUIRE(retired.size() == 2);
  CHECK(same(retired[0], first));
  CHECK(same(retired[1], second));
  CHECK(long_lived_memory::announced_ranges() == before);
  CHECK_FALSE(long_lived_memory::with_range_containing(second.start, 1, [](MemoryRange) {}));
}

TEST_CASE("long-lived memory: a removed listener is not called") {
  std::vector<std::byte> memory(64);
  const MemoryRange range{memory.data(), memory.size()};
  size_t calls = 0;
  {
    RecordingListener listener;
    long_lived_memory::announce(range);
    CHECK(long_lived_memory::with_range_containing(memory.data() + 8, 8, [&](MemoryRange) { ++calls; }));
    long_lived_memory::retire(range);
    CHECK(listener.retired().size() == 1);
  }
  CHECK(calls == 1);
  RecordingListener other;
  long_lived_memory::announce(range);
  long_lived_memory::retire(range);
  // Only the listener alive at the second retire saw it.
  CHECK(other.retired().size() == 1);
  CHECK_FALSE(long_lived_memory::with_range_containing(memory.data(), 1, [](MemoryRange) {}));
}
