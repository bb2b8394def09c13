// Host memory playing device memory for the cuda_ipc transport
// (transport/cuda_ipc/cuda_ipc.h), so its protocol runs over real shm pairs
// on machines without a GPU: "exporting" an allocation hands out its
// address, "opening" returns it (both ends are threads of one process).
#pragma once

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>

#include "base/error.h"
#include "transport/cuda_ipc/cuda_ipc.h"

namespace chorus::transport::testing {

class HostIpcMemory final : public cuda_ipc::IpcMemory {
 public:
  struct Allocation {
    std::unique_ptr<std::byte[]> data;
    size_t bytes;
    uint64_t id;
  };

  std::byte* make(size_t bytes) {
    std::lock_guard lock(mutex_);
    allocations_.push_back({std::make_unique<std::byte[]>(bytes), bytes, ++last_id_});
    return allocations_.back().data.get();
  }
  // As if freed and allocated again at the same address: a new buffer id.
  void renew(const std::byte* base) {
    std::lock_guard lock(mutex_);
    for (Allocation& allocation : allocations_)
      if (allocation.data.get() == base) allocation.id = ++last_id_;
  }

  cuda::IpcExport export_region(const void* pointer, int /*device*/) override {
    std::lock_guard lock(mutex_);
    const auto* at = static_cast<const std::byte*>(pointer);
    for (const Allocation& allocation : allocations_) {
      const std::byte* base = allocation.data.get();
      if (at < base || at >= base + allocation.bytes) continue;
      cuda::IpcExport exported;
      std::memcpy(exported.handle.data(), &base, sizeof(base));
      exported.base = base;
      exported.allocation_bytes = allocation.bytes;
      exported.buffer_id = allocation.id;
      ++exports;
      return exported;
    }
    throw InvalidArgument("not an allocation of the test");
  }
  std::byte* open(const std::array<unsigned char, 64>& handle, int) override {
    std::byte* base = nullptr;
    std::memcpy(&base, handle.data(), sizeof(base));
    ++opens;
    return base;
  }
  void close(std::byte*) override { ++closes; }
  void copy(std::byte* to, const std::byte* from, size_t bytes, int) override {
    std::memcpy(to, from, bytes);
    ++copies;
  }
  std::shared_ptr<std::byte> allocate(size_t bytes, int) override {
    std::byte* data = make(bytes);
    return std::shared_ptr<std::byte>(data, [](std::byte*) {});
  }

  std::atomic<int> exports{0}, opens{0}, closes{0}, copies{0};

 private:
  std::mutex mutex_;
  std::deque<Allocation> allocations_;
  uint64_t last_id_ = 0;
};

}  // namespace chorus::transport::testing
