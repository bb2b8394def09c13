#include "base/long_lived_memory.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus::long_lived_memory {
namespace {

// One lock for ranges and listeners: a retire and a pin made under
// with_range_containing never interleave, and a listener is never removed
// (and destroyed) while retire() is calling it.
struct Registry {
  std::mutex mutex;
  struct Announced {
    size_t bytes = 0;
    size_t holders = 0;  // announcements not yet retired
  };
  std::map<const std::byte*, Announced> ranges;  // by start; never overlapping
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

std::string describe(const std::byte* start, size_t bytes) {
  return cat("[", static_cast<const void*>(start), ", +", bytes, " bytes)");
}

std::string overlap_error(MemoryRange range, const std::byte* start, size_t bytes) {
  return cat("memory ", describe(range.start, range.bytes), " overlaps ", describe(start, bytes),
             ", which is registered already: register a buffer whole, once per allocation, or the very same "
             "range again");
}

}  // namespace

void announce(MemoryRange range) {
  if (range.bytes == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto next = r.ranges.upper_bound(range.start);
  if (next != r.ranges.begin()) {
    auto& [start, announced] = *std::prev(next);
    if (start == range.start && announced.bytes == range.bytes) {
      ++announced.holders;
      return;
    }
    if (static_cast<size_t>(range.start - start) < announced.bytes)
      throw InvalidArgument(overlap_error(range, start, announced.bytes));
  }
  if (next != r.ranges.end() && static_cast<size_t>(next->first - range.start) < range.bytes)
    throw InvalidArgument(overlap_error(range, next->first, next->second.bytes));
  r.ranges.emplace(range.start, Registry::Announced{range.bytes, 1});
  r.count.store(r.ranges.size(), std::memory_order_relaxed);
}

void retire(MemoryRange range) {
  if (range.bytes == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto found = r.ranges.find(range.start);
  if (found == r.ranges.end() || found->second.bytes != range.bytes) return;
  if (--found->second.holders > 0) return;
  for (LongLivedMemoryListener* listener : r.listeners) listener->retiring(range);
  r.ranges.erase(found);
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
  const auto& [start, announced] = *std::prev(next);
  const MemoryRange range{start, announced.bytes};
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
