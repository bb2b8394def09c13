// Fences by events (event_fences.h).
#include "memory/cuda/event_fences.h"

#include "base/error.h"
#include "base/log.h"

namespace chorus::cuda {

uint64_t EventFences::record(void* stream, int device) {
  void* event = nullptr;
  if (!spare_events_.empty()) {
    event = spare_events_.back();
    spare_events_.pop_back();
  } else if (CudaStatus status = api_->event_create(device, &event)) {
    throw IoError(cat("creating an event on cuda:", device, ": ", status));
  }
  if (CudaStatus status = api_->event_record(event, stream)) {
    spare_events_.push_back(event);
    throw IoError(cat("recording a fence on cuda:", device, ": ", status));
  }
  recorded_fences_.emplace_back(++recorded_, event);
  return recorded_;
}

bool EventFences::passed(uint64_t fence, int device) {
  // One stream: a fence passes after every fence recorded before it.
  while (fence > passed_ && !recorded_fences_.empty()) {
    const auto [number, event] = recorded_fences_.front();
    int done = 0;
    if (CudaStatus status = api_->event_query(event, &done))
      throw IoError(cat("waiting for queued work on cuda:", device, ": ", status));
    if (!done) return false;
    passed_ = number;
    spare_events_.push_back(event);
    recorded_fences_.pop_front();
  }
  return fence <= passed_;
}

void EventFences::all_passed() {
  for (const auto& [number, event] : recorded_fences_) spare_events_.push_back(event);
  recorded_fences_.clear();
  passed_ = recorded_;
}

void EventFences::release() noexcept {
  all_passed();
  for (void* event : spare_events_) api_->event_destroy(event);
  spare_events_.clear();
}

}  // namespace chorus::cuda
