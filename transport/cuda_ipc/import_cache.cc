// The LRU of opened peer allocations.
#include "transport/cuda_ipc/import_cache.h"

#include "base/error.h"

namespace chorus::transport::cuda_ipc {

ImportCache::ImportCache(Open open, Close close, size_t capacity)
    : open_(std::move(open)), close_(std::move(close)), capacity_(capacity) {
  if (capacity_ == 0) throw InvalidArgument("an IPC import cache needs room for one mapping");
}

ImportCache::~ImportCache() { clear(); }

std::byte* ImportCache::map(int peer, const IpcDescriptor& descriptor) {
  const Key key{peer, descriptor.base};
  if (auto found = index_.find(key); found != index_.end()) {
    auto entry = found->second;
    if (entry->buffer_id == descriptor.buffer_id) {
      entries_.splice(entries_.begin(), entries_, entry);
      return entry->local;
    }
    // Freed and allocated again at the same address: another allocation.
    erase(entry);
  }
  std::byte* local = open_(descriptor);
  ++opened_;
  entries_.push_front({peer, descriptor.base, descriptor.buffer_id, local});
  index_[key] = entries_.begin();
  while (entries_.size() > capacity_) erase(std::prev(entries_.end()));
  return local;
}

void ImportCache::forget(int peer) {
  for (auto entry = entries_.begin(); entry != entries_.end();) {
    auto next = std::next(entry);
    if (entry->peer == peer) erase(entry);
    entry = next;
  }
}

void ImportCache::clear() {
  while (!entries_.empty()) erase(entries_.begin());
}

void ImportCache::erase(std::list<Entry>::iterator entry) {
  close_(entry->local);
  index_.erase(Key{entry->peer, entry->base});
  entries_.erase(entry);
}

}  // namespace chorus::transport::cuda_ipc
