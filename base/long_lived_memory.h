// Host memory that stays allocated from call to call and whose owner says
// so before freeing it: chorus's own (the executor's scratch), and a
// caller's buffers registered with chorus::register_buffer
// (chorus/registered_buffer.h).
//
// Why a transport cares: verbs without on-demand paging must pin a buffer
// before the NIC may touch it, and pinning costs microseconds to
// milliseconds. It may not keep a pin of an unregistered caller's buffer
// across messages: nothing tells chorus when the caller frees it, and a pin
// that outlives a free() hands the NIC the old pages when a new buffer
// appears at the same address, which is a silent wrong answer. Memory on
// this list is different: retire() runs every listener (a transport dropping
// its pin) before its owner frees it. So a transport may pin such a range
// once and keep the pin until it is retired. Internal (not installed).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>

namespace chorus {

struct MemoryRange {
  const std::byte* start = nullptr;
  size_t bytes = 0;
  bool contains(const std::byte* address, size_t length) const {
    return address >= start && length <= bytes && static_cast<size_t>(address - start) <= bytes - length;
  }
};

// Told before a long-lived range is freed.
class LongLivedMemoryListener {
 public:
  virtual ~LongLivedMemoryListener() = default;
  // The range is still allocated (and readable) while this runs; whatever
  // the listener keeps of it must be gone when it returns.
  virtual void retiring(MemoryRange range) = 0;
};

namespace long_lived_memory {

// `range` is allocated and will be retired before it is freed. The same
// range announced again counts once more (two registrations of one buffer);
// a range that overlaps another without being it throws InvalidArgument,
// naming both: a lookup by address must find one range, whole.
void announce(MemoryRange range);
// Takes back one announcement of `range`; the last one runs every listener's
// retiring(range), then forgets it. Call before freeing. A range that was
// never announced is ignored.
void retire(MemoryRange range);

// Runs `use` with the announced range that holds [address, address + bytes),
// if there is one, and returns whether there was. The range cannot be retired
// (nor a listener removed) while `use` runs, so what `use` makes of it (a
// pin) can never outlive the memory unnoticed.
bool with_range_containing(const std::byte* address, size_t bytes, const std::function<void(MemoryRange)>& use);

// A listener stays registered until removed; remove it before it is destroyed.
void add_listener(LongLivedMemoryListener* listener);
void remove_listener(LongLivedMemoryListener* listener);

// How many ranges are announced now (for tests).
size_t announced_ranges();

}  // namespace long_lived_memory
}  // namespace chorus
