// The fences of one thread's stream on one device (MemoryBackend::
// record_fence, the executor's stream-ordered path): an event recorded on
// the stream per fence, asked about oldest first without waiting, and kept
// for a later fence once it has passed, so a training loop creates events
// only in its first calls. Speaks to the driver through the module's table
// alone (module_api.h), so its bookkeeping is tested on machines without a
// GPU with a table of its own (test/cuda/test_cuda_host.cc).
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "memory/cuda/module_api.h"

namespace chorus::cuda {

class EventFences {
 public:
  explicit EventFences(const ModuleApi& api) : api_(&api) {}
  EventFences(EventFences&&) = default;
  EventFences& operator=(EventFences&&) = default;

  // A fence after the work queued on `stream` so far; numbers grow from 1.
  // Throws IoError naming `device` when the driver refuses.
  uint64_t record(void* stream, int device);
  // Whether `fence` and every fence before it have passed; never waits.
  bool passed(uint64_t fence, int device);
  // The stream was waited for: every fence recorded has passed.
  void all_passed();
  // Destroys the events (the thread ends); errors are ignored, since the
  // runtime may be gone at process exit.
  void release() noexcept;

  size_t pending() const { return recorded_fences_.size(); }
  size_t events() const { return recorded_fences_.size() + spare_events_.size(); }

 private:
  const ModuleApi* api_;
  std::deque<std::pair<uint64_t, void*>> recorded_fences_;  // not yet seen to pass, oldest first
  std::vector<void*> spare_events_;
  uint64_t recorded_ = 0;
  uint64_t passed_ = 0;
};

}  // namespace chorus::cuda
