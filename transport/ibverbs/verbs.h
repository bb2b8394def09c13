// Thin owners of verbs and rdma_cm objects, memory regions as the seam's
// Registrations, and the choice of the address a device listens on.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "base/config.h"
#include "transport/registration.h"

namespace chorus::transport::ibverbs {

struct PdDeleter {
  void operator()(ibv_pd* pd) const { ibv_dealloc_pd(pd); }
};
struct CqDeleter {
  void operator()(ibv_cq* cq) const { ibv_destroy_cq(cq); }
};
struct CompChannelDeleter {
  void operator()(ibv_comp_channel* channel) const { ibv_destroy_comp_channel(channel); }
};
struct EventChannelDeleter {
  void operator()(rdma_event_channel* channel) const { rdma_destroy_event_channel(channel); }
};
using ProtectionDomain = std::unique_ptr<ibv_pd, PdDeleter>;
using CompletionQueue = std::unique_ptr<ibv_cq, CqDeleter>;
using CompletionChannel = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using EventChannel = std::unique_ptr<rdma_event_channel, EventChannelDeleter>;

// Every region allows local writes and remote reads and writes: the same
// buffer is a send source, a write target and (one-sided) a get source.
inline constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// One ibv_mr over whole pages around the range asked for; deregisters when destroyed.
class MemoryRegion final : public Registration {
 public:
  MemoryRegion(ibv_mr* mr, const std::byte* start, size_t bytes, Memory memory)
      : Registration(start, bytes, memory), mr_(mr) {}
  ~MemoryRegion() override { ibv_dereg_mr(mr_); }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  std::optional<RemoteMemory> remote() const override {
    return RemoteMemory{reinterpret_cast<uintptr_t>(address()), mr_->rkey};
  }

 private:
  ibv_mr* mr_;
};

// Registers page-aligned ranges with one protection domain, pinned, or
// on-demand (IBV_ACCESS_ON_DEMAND: the device follows the process's page
// tables, so a cached region stays right when the memory is unmapped and
// mapped again) where the device supports it.
class Registrar final : public transport::Registrar {
 public:
  Registrar(ibv_pd* pd, bool on_demand, int rank) : pd_(pd), on_demand_(on_demand), rank_(rank) {}
  std::shared_ptr<Registration> register_range(const std::byte* address, size_t bytes, Memory memory) override;
  bool on_demand() const { return on_demand_; }

 private:
  ibv_pd* pd_;
  bool on_demand_;
  int rank_;
};

// Whether the device supports on-demand paging for RC writes, reads and receives.
bool supports_on_demand_paging(ibv_context* context);

// The local address a device listens on. CHORUS_IB_DEVICE ("name[:port[:gid
// index]]") wins: the IP address its GID carries (the first RoCE v2 IPv4 GID
// without an index). Else as tcp chooses (tcp/socket.h,
// choose_local_address), loopback excepted. Throws InvalidArgument.
sockaddr_storage choose_listen_address(const std::string& ib_device, const std::string& interface,
                                       const std::string& hostname, const JobPlacement& placement, int rank);

// "transport retry counter exceeded" and the like, for a work completion's status.
std::string completion_status_text(ibv_wc_status status);

}  // namespace chorus::transport::ibverbs
