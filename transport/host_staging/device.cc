// The staging decorator of host_staging.h: a Device and its Pairs that pass
// host memory through and pipeline device memory through pinned chunks.
#include <algorithm>
#include <array>
#include <mutex>
#include <vector>

#include "memory/registry.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/decorated_device.h"
#include "transport/host_staging/host_staging.h"

namespace chorus::transport::host_staging {
namespace {

constexpr size_t kMaxChunksPerMessage = 16;

class StagingDevice;
using StagingPair = KindPair<StagingDevice>;

// One device-memory message in flight, cut into chunks.
struct Transfer {
  struct Slot {
    size_t chunk = 0;
    std::byte* pinned = nullptr;  // null: free
    Request request;
  };
  bool sending = false;
  Pair* inner = nullptr;
  Request* user = nullptr;  // null once settled
  Tag tag;
  std::span<std::byte> data;
  int device = 0;
  size_t chunks = 1;
  size_t started = 0;   // chunks posted
  size_t finished = 0;  // chunks done (a receive finishes them in order)
  std::array<Slot, kMaxChunksPerMessage> slots;
};

class StagingDevice final : public TransferDevice<Transfer> {
 public:
  StagingDevice(std::unique_ptr<Device> inner, MemoryKind kind, std::shared_ptr<Copier> copier,
                StagingOptions options)
      : TransferDevice(std::move(inner)), kind_(kind), copier_(std::move(copier)), options_(options) {
    if (options_.chunk_bytes == 0 || options_.chunks_per_message == 0 ||
        options_.chunks_per_message > kMaxChunksPerMessage || options_.pool_chunks == 0)
      throw InvalidArgument(cat("host staging: chunks of ", options_.chunk_bytes, " bytes, ",
                                options_.chunks_per_message, " per message (1..", kMaxChunksPerMessage, "), ",
                                options_.pool_chunks, " in the pool"));
  }

  ~StagingDevice() override {
    stop_worker_and_close_inner();
    std::lock_guard lock(mutex_);
    fail_all(std::make_exception_ptr(Aborted("the device was closed with this message in flight")));
    for (std::byte* chunk : pool_) copier_->free_pinned(chunk);
  }

  std::unique_ptr<Pair> connect(int peer_rank, std::span<const std::byte> peer_address, Deadline deadline,
                                int stream) override {
    return std::make_unique<StagingPair>(*this, inner().connect(peer_rank, peer_address, deadline, stream));
  }
  bool accepts(const Memory& memory) const override {
    return memory.kind == kind_ || inner().accepts(memory);
  }

  bool moves_itself(const Memory& memory) const { return memory.kind == kind_; }
  void start(StagingPair& pair, Direction direction, Request& user, Tag tag, std::span<std::byte> data, int device);

 private:
  bool advance(Transfer& transfer) override;
  void fail_all(std::exception_ptr reason) override;
  void on_worker_round() override;
  void release(Transfer& transfer, Transfer::Slot& slot);
  size_t chunk_length(const Transfer& transfer, size_t chunk) const {
    const size_t offset = chunk * options_.chunk_bytes;
    return std::min(options_.chunk_bytes, transfer.data.size() - offset);
  }

  const MemoryKind kind_;
  std::shared_ptr<Copier> copier_;
  const StagingOptions options_;
  // Under mutex_, like the transfers.
  std::vector<std::byte*> pool_;  // every pinned chunk
  // Those not in a slot: half for sends, half for receives. A send hands
  // its chunk to the inner transport as an eager message, so it never waits
  // for the peer and its chunks always come back; a receive waits only for
  // the peer's sends, which its own half never holds up. One shared pool
  // could deadlock: receives holding every chunk while both peers wait for
  // sends that have none.
  std::vector<std::byte*> free_sends_;
  std::vector<std::byte*> free_receives_;
  std::vector<std::byte*>& free_for(const Transfer& transfer) {
    return transfer.sending ? free_sends_ : free_receives_;
  }
};

void StagingDevice::start(StagingPair& pair, Direction direction, Request& user, Tag tag, std::span<std::byte> data,
                          int device) {
  user.mark_pending();
  auto transfer = std::make_unique<Transfer>();
  transfer->sending = direction == Direction::send;
  transfer->inner = &pair.inner();
  transfer->user = &user;
  transfer->tag = tag;
  transfer->data = data;
  transfer->device = device;
  // An empty message still travels, as one empty chunk: the receiver's
  // match needs it.
  transfer->chunks = std::max<size_t>(1, (data.size() + options_.chunk_bytes - 1) / options_.chunk_bytes);
  for (Transfer::Slot& slot : transfer->slots) slot.request.attach(&signal_);
  std::lock_guard lock(mutex_);
  if (std::exception_ptr failed = failure()) {
    user.fail(failed);
    return;
  }
  if (pool_.empty()) {
    try {
      for (size_t i = 0; i < std::max<size_t>(options_.pool_chunks, 2); ++i)
        pool_.push_back(copier_->allocate_pinned(options_.chunk_bytes));
    } catch (...) {
      for (std::byte* chunk : pool_) copier_->free_pinned(chunk);
      pool_.clear();
      user.fail(std::current_exception());
      return;
    }
    const size_t for_sends = std::max<size_t>(1, pool_.size() / 2);
    free_sends_.assign(pool_.begin(), pool_.begin() + static_cast<long>(for_sends));
    free_receives_.assign(pool_.begin() + static_cast<long>(for_sends), pool_.end());
    start_worker();
  }
  // The first chunks go out (or are posted for) on the caller's thread: no
  // hand-off to the worker before the pipeline starts.
  if (!advance(*transfer)) transfers_.push_back(std::move(transfer));
}

void StagingDevice::release(Transfer& transfer, Transfer::Slot& slot) {
  free_for(transfer).push_back(slot.pinned);
  slot.pinned = nullptr;
}

bool StagingDevice::advance(Transfer& transfer) {
  const size_t depth = options_.chunks_per_message;
  try {
    // Finished chunks: a send's in any order, a receive's in chunk order
    // (each is copied into the device as it comes).
    for (bool moved = true; moved;) {
      moved = false;
      for (Transfer::Slot& slot : transfer.slots) {
        if (!slot.pinned || !slot.request.finished()) continue;
        if (slot.request.state() == Request::State::failed) std::rethrow_exception(slot.request.error());
        if (!transfer.sending) {
          if (slot.chunk != transfer.finished) continue;
          copier_->copy(transfer.data.data() + slot.chunk * options_.chunk_bytes, slot.pinned,
                        chunk_length(transfer, slot.chunk), transfer.device);
        }
        release(transfer, slot);
        ++transfer.finished;
        moved = true;
      }
    }
    if (transfer.finished == transfer.chunks) {
      settle(transfer, nullptr);
      return true;
    }
    // New chunks, while this message has slots and the pool has chunks.
    std::vector<std::byte*>& free = free_for(transfer);
    for (Transfer::Slot& slot : transfer.slots) {
      if (transfer.started == transfer.chunks || free.empty()) break;
      if (slot.pinned || transfer.started - transfer.finished >= depth) continue;
      slot.pinned = free.back();
      free.pop_back();
      slot.chunk = transfer.started++;
      const size_t length = chunk_length(transfer, slot.chunk);
      if (transfer.sending) {
        copier_->copy(slot.pinned, transfer.data.data() + slot.chunk * options_.chunk_bytes, length, transfer.device);
        Tag eager = transfer.tag;
        eager.eager = true;
        transfer.inner->post_send(slot.request, eager, {slot.pinned, length}, Memory::host());
      } else {
        transfer.inner->post_recv(slot.request, transfer.tag, {slot.pinned, length}, Memory::host());
      }
    }
    return false;
  } catch (...) {
    settle(transfer, std::current_exception());
    // The peer's half of this message can no longer match: the job ends.
    inner().abort_async(std::current_exception());
    for (Transfer::Slot& slot : transfer.slots)
      if (slot.pinned && slot.request.state() != Request::State::pending) release(transfer, slot);
    return std::none_of(transfer.slots.begin(), transfer.slots.end(),
                        [](const Transfer::Slot& slot) { return slot.pinned != nullptr; });
  }
}

void StagingDevice::fail_all(std::exception_ptr reason) {
  for (auto& transfer : transfers_) {
    settle(*transfer, reason);
    for (Transfer::Slot& slot : transfer->slots)
      if (slot.pinned && slot.request.state() != Request::State::pending) release(*transfer, slot);
  }
  std::erase_if(transfers_, [](const std::unique_ptr<Transfer>& transfer) {
    return std::none_of(transfer->slots.begin(), transfer->slots.end(),
                        [](const Transfer::Slot& slot) { return slot.pinned != nullptr; });
  });
}

void StagingDevice::on_worker_round() {
  if (std::exception_ptr failed = failure()) fail_all(failed);
  else advance_all();
}

// Looks the support up per call: it loads on first use, which a job that
// never moves device memory never makes.
class KindCopier final : public Copier {
 public:
  explicit KindCopier(MemoryKind kind) : kind_(kind) {}
  std::byte* allocate_pinned(size_t bytes) override { return memory_kind_support(kind_).allocate_pinned(bytes); }
  void free_pinned(std::byte* data) override { memory_kind_support(kind_).free_pinned(data); }
  void copy(std::byte* to, const std::byte* from, size_t bytes, int device) override {
    memory_kind_support(kind_).copy(to, from, bytes, device);
  }

 private:
  const MemoryKind kind_;
};

}  // namespace

std::unique_ptr<Device> wrap(std::unique_ptr<Device> inner, MemoryKind kind, std::shared_ptr<Copier> copier,
                             StagingOptions options) {
  return std::make_unique<StagingDevice>(std::move(inner), kind, std::move(copier), options);
}

std::shared_ptr<Copier> kind_copier(MemoryKind kind) { return std::make_shared<KindCopier>(kind); }

}  // namespace chorus::transport::host_staging
