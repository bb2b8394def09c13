// The bootstrap of NCCL's communicators over a Communicator.
#include "backends/nccl/nccl_groups.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/run.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::backends {

using algorithms::checked_call;
using algorithms::child_group;
using algorithms::make_call;
using algorithms::run_collective;

namespace {

constexpr size_t kBusIdBytes = 32;

// One GPU per rank of the host, by PCI bus id: two ordinals of two
// processes may be one GPU (CUDA_VISIBLE_DEVICES), which NCCL refuses.
void check_one_gpu_per_rank(const Communicator& communicator, const Communicator& local, int device,
                            Deadline deadline) {
  std::array<char, kBusIdBytes> mine{};
  const std::string bus = cuda::cuda_runtime().pci_bus_id(device);
  std::memcpy(mine.data(), bus.data(), std::min(bus.size(), kBusIdBytes - 1));
  std::vector<char> all(kBusIdBytes * static_cast<size_t>(local.size()));
  const Call gather =
      make_call(Collective::allgather, local.rank(), local.size(), kBusIdBytes, DataType::uint8, ReduceOp::sum, 0, false);
  run_collective(local, checked_call(local, gather, mine.data(), all.data()), mine.data(), all.data(), "auto",
                 /*sequence=*/0, deadline);
  const auto bus_of = [&](int rank) { return &all[kBusIdBytes * static_cast<size_t>(rank)]; };
  for (int a = 0; a < local.size(); ++a)
    for (int b = a + 1; b < local.size(); ++b)
      if (std::memcmp(bus_of(a), bus_of(b), kBusIdBytes) == 0)
        throw InvalidArgument(cat("rank ", communicator.rank(), ": allreduce with algorithm nccl: ranks ", a, " and ", b,
                                  " of this host both use the GPU at PCI ", bus_of(a),
                                  "; NCCL needs a GPU per rank (ranks sharing one: leave the algorithm to chorus, "
                                  "which moves their memory by CUDA IPC)"));
}

std::unique_ptr<NcclGroups> make_groups(const Communicator& communicator, int device, uint32_t sequence,
                                        Deadline deadline) {
  const Topology& topology = communicator.topology();
  const int host = topology.host_of(communicator.rank());
  auto groups = std::make_unique<NcclGroups>();
  groups->device = device;
  // Colors as a split would give them: the host for its ranks, and one no
  // host has for the leaders.
  const Communicator local = communicator.subgroup(topology.ranks_on(host),
                                                   child_group(communicator.group(), sequence, host));
  if (topology.hosts() > 1 && topology.local_rank(communicator.rank()) == 0) {
    std::vector<int> leaders;
    for (int other = 0; other < topology.hosts(); ++other) leaders.push_back(topology.ranks_on(other).front());
    groups->leaders = std::make_unique<Communicator>(
        communicator.subgroup(leaders, child_group(communicator.group(), sequence, topology.hosts())));
  }
  check_one_gpu_per_rank(communicator, local, device, deadline);
  cuda::Runtime& runtime = cuda::cuda_runtime();
  cuda::NcclUniqueId id{};
  if (local.rank() == 0) id = runtime.nccl_unique_id();
  const Call share =
      make_call(Collective::broadcast, local.rank(), local.size(), id.size(), DataType::uint8, ReduceOp::sum, 0, true);
  run_collective(local, checked_call(local, share, id.data(), id.data()), id.data(), id.data(), "auto",
                 /*sequence=*/1, deadline);
  groups->local = runtime.nccl_communicator(local.size(), id, local.rank(), device);
  return groups;
}

}  // namespace

NcclGroups& nccl_groups(const Communicator& communicator, int device, uint32_t sequence, Deadline deadline) {
  auto& groups = static_cast<NcclGroups&>(communicator.backend_states().get_or_make(
      "nccl", [&] { return make_groups(communicator, device, sequence, deadline); }));
  if (groups.device != device)
    throw InvalidArgument(cat("rank ", communicator.rank(), ": allreduce with algorithm nccl on cuda:", device,
                              ", but this Context's NCCL communicator is on cuda:", groups.device));
  return groups;
}

}  // namespace chorus::backends
