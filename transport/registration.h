// Memory registration, the transport's business. RDMA must register a
// buffer with the NIC before it can be written remotely, and CUDA IPC must
// export a handle before another process can open it; both are slow (tens of
// microseconds to milliseconds), so a training loop that hands the same
// gradient buffers to every step must pay it once. Devices return a
// Registration from Device::register_memory; transports that need one keep a
// RegistrationCache in front of their registrar and consult it when a
// message is posted, so algorithms never register anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>

#include "base/memory.h"

namespace chorus::transport {

// Where a peer may read and write a registered range one-sidedly: an address
// in its process and the key its device checks (an RDMA rkey).
struct RemoteMemory {
  uint64_t address = 0;
  uint64_t key = 0;
};

// One registered range. Transports derive from it to hold their handle (an
// ibv_mr, an IPC handle); destroying it deregisters.
class Registration {
 public:
  Registration(const std::byte* address, size_t bytes, Memory memory)
      : address_(address), bytes_(bytes), memory_(memory) {}
  virtual ~Registration() = default;
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  const std::byte* address() const { return address_; }
  size_t bytes() const { return bytes_; }
  const Memory& memory() const { return memory_; }
  bool covers(const std::byte* address, size_t bytes) const {
    return address >= address_ && bytes <= bytes_ && static_cast<size_t>(address - address_) <= bytes_ - bytes;
  }
  // What a peer needs to reach it one-sidedly (Pair::post_put/post_get);
  // nullopt where the transport offers no one-sided access.
  virtual std::optional<RemoteMemory> remote() const { return std::nullopt; }

 private:
  const std::byte* address_;
  size_t bytes_;
  Memory memory_;
};

// What a transport does to register one range.
class Registrar {
 public:
  virtual ~Registrar() = default;
  virtual std::shared_ptr<Registration> register_range(const std::byte* address, size_t bytes, Memory memory) = 0;
};

// Registrations by address range. acquire() reuses a cached registration
// that covers the request and registers (through the Registrar) only on a
// miss. The cache holds at most `capacity` entries; beyond that it drops the
// least recently used ones that no posted message holds any more (a
// registration stays valid while anyone holds its shared_ptr). invalidate()
// forgets every registration overlapping a range whose memory is about to be
// freed, since the next buffer at that address is other memory. Thread-safe.
class RegistrationCache {
 public:
  RegistrationCache(Registrar& registrar, size_t capacity);

  std::shared_ptr<Registration> acquire(const std::byte* address, size_t bytes, Memory memory);
  // A cached registration covering the range, or null; never registers.
  std::shared_ptr<Registration> find(const std::byte* address, size_t bytes, Memory memory);
  void invalidate(const std::byte* address, size_t bytes);

  size_t size() const;
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Entry {
    std::shared_ptr<Registration> registration;
    uint64_t last_used = 0;
  };
  void evict_locked();
  std::shared_ptr<Registration> find_locked(const std::byte* address, size_t bytes, const Memory& memory);

  Registrar& registrar_;
  const size_t capacity_;
  mutable std::mutex mutex_;
  // By start address; ranges of different entries may overlap.
  std::multimap<const std::byte*, Entry> entries_;
  size_t longest_ = 0;  // the longest cached range, bounding the lookup
  uint64_t clock_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace chorus::transport
