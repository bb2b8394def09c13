// The registration cache.
#include "transport/registration.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {

RegistrationCache::RegistrationCache(Registrar& registrar, size_t capacity)
    : registrar_(registrar), capacity_(std::max<size_t>(capacity, 1)) {}

std::shared_ptr<Registration> RegistrationCache::find_locked(const std::byte* address, size_t bytes,
                                                             const Memory& memory) {
  // Candidates start at or below `address`, and no further below than the
  // longest cached range reaches.
  auto it = entries_.upper_bound(address);
  while (it != entries_.begin()) {
    --it;
    if (static_cast<size_t>(address - it->first) > longest_) break;
    Entry& entry = it->second;
    if (entry.registration->memory() == memory && entry.registration->covers(address, bytes)) {
      entry.last_used = ++clock_;
      ++hits_;
      return entry.registration;
    }
  }
  ++misses_;
  return nullptr;
}

std::shared_ptr<Registration> RegistrationCache::find(const std::byte* address, size_t bytes, Memory memory) {
  std::lock_guard<std::mutex> lock(mutex_);
  return find_locked(address, bytes, memory);
}

std::shared_ptr<Registration> RegistrationCache::acquire(const std::byte* address, size_t bytes, Memory memory) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto cached = find_locked(address, bytes, memory)) return cached;
  }
  // Registering can take milliseconds: not under the lock. Two threads
  // missing on the same range both register; both entries stay valid.
  std::shared_ptr<Registration> registration = registrar_.register_range(address, bytes, memory);
  if (!registration || !registration->covers(address, bytes))
    throw Error(cat("transport registration of ", bytes, " bytes of ", to_string(memory),
                    " returned a registration that does not cover them"));
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.emplace(registration->address(), Entry{registration, ++clock_});
  longest_ = std::max(longest_, registration->bytes());
  evict_locked();
  return registration;
}

void RegistrationCache::evict_locked() {
  while (entries_.size() > capacity_) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      // Held by a posted message: not ours to drop yet.
      if (it->second.registration.use_count() > 1) continue;
      if (oldest == entries_.end() || it->second.last_used < oldest->second.last_used) oldest = it;
    }
    if (oldest == entries_.end()) return;  // every entry is in use; over capacity until some finish
    entries_.erase(oldest);
  }
}

void RegistrationCache::invalidate(const std::byte* address, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const std::byte* start = it->first;
    const std::byte* end = start + it->second.registration->bytes();
    if (start < address + bytes && address < end)
      it = entries_.erase(it);
    else
      ++it;
  }
}

size_t RegistrationCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

uint64_t RegistrationCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

uint64_t RegistrationCache::misses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

}  // namespace chorus::transport
