// Registering memory with the verbs device (engine.h): the buffers of
// messages (cached, or for one message only), explicit registrations the
// user holds, and the cache entries of memory chorus is about to free.
#include <memory>

#include "base/error.h"
#include "transport/ibverbs/engine.h"

namespace chorus::transport::ibverbs {

std::shared_ptr<MemoryRegion> Engine::region_for(const std::byte* data, size_t bytes) {
  // Cached where the device pages on demand, and so follows the memory
  // wherever it is remapped.
  if (registrar_->on_demand())
    return std::static_pointer_cast<MemoryRegion>(cache_->acquire(data, bytes, Memory::host()));
  // Registered by the caller (register_memory), or chorus's own long-lived
  // memory pinned by an earlier message.
  if (auto cached = cache_->find(data, bytes, Memory::host())) return std::static_pointer_cast<MemoryRegion>(cached);
  // chorus's own long-lived memory (the executor's scratch): pinned whole,
  // once, and kept until chorus retires it (retiring(), before it is freed).
  std::shared_ptr<Registration> whole;
  if (long_lived_memory::with_range_containing(data, bytes, [&](MemoryRange range) {
        whole = cache_->acquire(range.start, range.bytes, Memory::host());
      }))
    return std::static_pointer_cast<MemoryRegion>(whole);
  // The caller's memory that the caller never registered: for this message
  // only. A cached pin would outlive a free() and a new buffer at the same
  // address would receive into the old pages.
  return register_owned(data, bytes);
}

void Engine::retiring(MemoryRange range) { cache_->invalidate(range.start, range.bytes); }

std::shared_ptr<MemoryRegion> Engine::register_owned(const std::byte* data, size_t bytes) {
  return std::static_pointer_cast<MemoryRegion>(registrar_->register_range(data, bytes, Memory::host()));
}

namespace {

// What register_memory hands out: holds the cached region and forgets it
// when the caller lets go, since the memory may be freed right after.
class ExplicitRegistration final : public Registration {
 public:
  ExplicitRegistration(std::shared_ptr<Registration> region, std::shared_ptr<void> engine,
                       RegistrationCache& cache)
      : Registration(region->address(), region->bytes(), region->memory()),
        region_(std::move(region)),
        engine_(std::move(engine)),
        cache_(cache) {}
  ~ExplicitRegistration() override { cache_.invalidate(address(), bytes()); }
  std::optional<RemoteMemory> remote() const override { return region_->remote(); }

 private:
  std::shared_ptr<Registration> region_;
  std::shared_ptr<void> engine_;  // keeps the cache alive
  RegistrationCache& cache_;
};

}  // namespace

std::shared_ptr<Registration> Engine::register_memory(std::span<const std::byte> data) {
  if (!available()) throw InvalidArgument(cat("rank ", rank(), ": no RDMA device to register memory with"));
  return std::make_shared<ExplicitRegistration>(cache_->acquire(data.data(), data.size(), Memory::host()),
                                                shared_from_this(), *cache_);
}

}  // namespace chorus::transport::ibverbs
