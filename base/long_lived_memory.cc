#include "base/long_lived_memory.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

namespace chorus::long_lived_memory {
namespace {

// One lock for ranges and listeners: a retire and a pin made under
// with_range_containing never interleave, and a listener is never removed
// (and destroyed) while retire() is calling it.
struct Registry {
  std::mutex mutex;
  std::map<const std::byte*, size_t> ranges;  // start -> bytes
  std::vector<LongLivedMemoryListener*> listeners;
  // Lets the per-message lookup skip the lock in a process with no ranges.
  std::atomic<size_t> count{0};
};

Registry& registry() {
  // Never destroyed: a thread's scratch may be retired at its exit, after
  // static destructors of the main thread have run.
  static Registry* const instance = new Registry;
  return *instance;
}

}  // namespace

void announce(MemoryRange range) {
  if (range.bytes == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.ranges[range.start] = range.bytes;
  r.count.store(r.ranges.size(), std::memory_order_relaxed);
}

void retire(MemoryRange range) {
  if (range.bytes == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (LongLivedMemoryListener* listener : r.listeners) listener->retiring(range);
  r.ranges.erase(range.start);
  r.count.store(r.ranges.size(), std::memory_order_relaxed);
}

bool with_range_containing(const std::byte* address, size_t bytes, const std::function<void(MemoryRange)>& use) {
  Registry& r = registry();
  if (r.count.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(r.mutex);
  // Ranges never overlap (each is a live allocation): the candidate is the
  // last one starting at or before the address.
  auto next = r.ranges.upper_bound(address);
  if (next == r.ranges.begin()) return false;
  const auto& [start, length] = *std::prev(next);
  const MemoryRange range{start, length};
  if (!range.contains(address, bytes)) return false;
  use(range);
  return true;
}

void add_listener(LongLivedMemoryListener* listener) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.listeners.push_back(listener);
}

void remove_listener(LongLivedMemoryListener* listener) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::erase(r.listeners, listener);
}

size_t announced_ranges() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.ranges.size();
}

}  // namespace chorus::long_lived_memory
