// The gate of deferred_frees.h.
#include "memory/cuda/deferred_frees.h"

#include <cassert>

namespace chorus::cuda {

DeferredFrees::~DeferredFrees() {
  std::lock_guard lock(mutex_);
  free_kept();
}

void DeferredFrees::begin_wait(const std::function<void()>& queue) {
  std::lock_guard lock(mutex_);
  queue();
  ++waits_;
}

void DeferredFrees::end_wait() {
  std::lock_guard lock(mutex_);
  assert(waits_ > 0);
  --waits_;
}

void DeferredFrees::free(void* pointer, Kind kind) {
  if (!pointer) return;
  std::lock_guard lock(mutex_);
  kept_.emplace_back(pointer, kind);
  if (waits_ == 0) free_kept();
}

void DeferredFrees::free_kept() {
  // Taken out first: a free that throws leaves no pointer to free twice.
  std::vector<std::pair<void*, Kind>> frees;
  frees.swap(kept_);
  for (const auto& [pointer, kind] : frees) free_(pointer, kind);
}

size_t DeferredFrees::waits() const {
  std::lock_guard lock(mutex_);
  return waits_;
}

size_t DeferredFrees::kept() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

}  // namespace chorus::cuda
