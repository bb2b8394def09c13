// The peers' device allocations this process has opened (CUDA IPC), so a
// training loop's buffers are opened once, not per message
// (cudaIpcOpenMemHandle costs tens of microseconds and a mapping).
//
// Keyed by (peer, the allocation's base in the peer, the peer driver's
// buffer id). A peer that freed an allocation and got a new one at the same
// address sends another buffer id: the stale mapping is closed and the new
// one opened, never reused (it would read the old, freed memory). At most
// `capacity` mappings stay open; the least recently used goes first. Only
// the transport's one worker thread maps, and a mapping it got stays valid
// until its next call.
//
// Host logic only: opening and closing are the caller's functions (the CUDA
// runtime in the transport; plain memory in tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <tuple>

#include "transport/cuda_ipc/descriptor.h"

namespace chorus::transport::cuda_ipc {

class ImportCache {
 public:
  using Open = std::function<std::byte*(const IpcDescriptor&)>;
  using Close = std::function<void(std::byte*)>;

  ImportCache(Open open, Close close, size_t capacity = 128);
  ~ImportCache();
  ImportCache(const ImportCache&) = delete;
  ImportCache& operator=(const ImportCache&) = delete;

  // This process's address of the descriptor's allocation (its base).
  std::byte* map(int peer, const IpcDescriptor& descriptor);
  // Closes every mapping of `peer` (it left) or of everyone.
  void forget(int peer);
  void clear();

  size_t size() const { return entries_.size(); }
  uint64_t opened() const { return opened_; }

 private:
  struct Entry {
    int peer;
    uint64_t base;
    uint64_t buffer_id;
    std::byte* local;
  };
  using Key = std::tuple<int, uint64_t>;  // (peer, base): one live allocation per address

  Open open_;
  Close close_;
  size_t capacity_;
  std::list<Entry> entries_;  // most recently used first
  std::map<Key, std::list<Entry>::iterator> index_;
  uint64_t opened_ = 0;

  void erase(std::list<Entry>::iterator entry);
};

}  // namespace chorus::transport::cuda_ipc
