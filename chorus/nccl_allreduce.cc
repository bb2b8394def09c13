// The NCCL path of allreduce.
#include "chorus/nccl_allreduce.h"

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/cuda/runtime.h"
#include "base/error.h"
#include "base/log.h"
#include "chorus/collectives.h"
#include "chorus/collectives_gather.h"
#include "chorus/context_state.h"
#include "chorus/device_memory.h"

namespace chorus::detail {

// What a Context keeps for its NCCL calls (ContextState::nccl).
struct NcclGroups {
  int device = -1;
  std::shared_ptr<Context> local;    // the ranks of this host
  std::shared_ptr<Context> leaders;  // each host's first rank; null elsewhere
  std::unique_ptr<cuda::NcclCommunicator> communicator;
};

namespace {

constexpr size_t kBusIdBytes = 32;

std::shared_ptr<NcclGroups> build_groups(Context& context, int device) {
  cuda::Runtime& runtime = cuda::cuda_runtime();
  auto groups = std::make_shared<NcclGroups>();
  groups->device = device;
  groups->local = context.split(context.host_of(context.rank()), context.rank());
  groups->leaders = context.split(context.local_rank() == 0 ? 0 : Context::kNoColor, context.rank());
  Context& local = *groups->local;
  // One GPU per rank of the host, by PCI bus id: two ordinals of two
  // processes may be one GPU (CUDA_VISIBLE_DEVICES), which NCCL refuses.
  std::array<char, kBusIdBytes> mine{};
  const std::string bus = runtime.pci_bus_id(device);
  std::memcpy(mine.data(), bus.data(), std::min(bus.size(), kBusIdBytes - 1));
  std::vector<char> all(kBusIdBytes * static_cast<size_t>(local.size()));
  allgather(local, mine.data(), all.data(), kBusIdBytes, DataType::uint8);
  for (int a = 0; a < local.size(); ++a)
    for (int b = a + 1; b < local.size(); ++b)
      if (std::memcmp(&all[kBusIdBytes * static_cast<size_t>(a)], &all[kBusIdBytes * static_cast<size_t>(b)],
                      kBusIdBytes) == 0)
        throw InvalidArgument(cat("rank ", context.rank(), ": allreduce with algorithm nccl: ranks ", a, " and ", b,
                                  " of this host both use the GPU at PCI ", &all[kBusIdBytes * static_cast<size_t>(a)],
                                  "; NCCL needs a GPU per rank (ranks sharing one: leave the algorithm to chorus, "
                                  "which moves their memory by CUDA IPC)"));
  cuda::NcclUniqueId id{};
  if (local.rank() == 0) id = runtime.nccl_unique_id();
  broadcast(local, id.data(), id.size(), DataType::uint8, 0);
  groups->communicator = runtime.nccl_communicator(local.size(), id, local.rank(), device);
  return groups;
}

NcclGroups& groups_of(Context& context, int device) {
  ContextState& state = state_of(context);
  std::lock_guard lock(state.nccl_mutex);
  if (!state.nccl) state.nccl = build_groups(context, device);
  auto& groups = *std::static_pointer_cast<NcclGroups>(state.nccl);
  if (groups.device != device)
    throw InvalidArgument(cat("rank ", context.rank(), ": allreduce with algorithm nccl on cuda:", device,
                              ", but this Context's NCCL communicator is on cuda:", groups.device));
  return groups;
}

}  // namespace

void nccl_allreduce(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                    const CollectiveOptions& options) {
  const int rank = context.rank();
  if (options.memory.kind != MemoryKind::cuda)
    throw InvalidArgument(cat("rank ", rank, ": allreduce with algorithm nccl needs CUDA memory (the options say ",
                              to_string(options.memory), ")"));
  if (op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor)
    throw InvalidArgument(cat("rank ", rank, ": allreduce with algorithm nccl: NCCL has no ", to_string(op),
                              " reduction"));
  const std::unique_ptr<cuda::StreamOrder> order =
      prepare_device_call(context, "allreduce", options, {{"input", input}, {"output", output}}, false);
  const int device = options.memory.device;
  NcclGroups& groups = groups_of(context, device);
  cuda::Runtime& runtime = cuda::cuda_runtime();
  void* stream = options.cuda_stream;
  // NCCL queues on the caller's stream: ordered after its work as it is.
  if (context.hosts() == 1) {
    groups.communicator->allreduce(input, output, count, type, op, stream);
  } else {
    const ReduceOp summing = op == ReduceOp::avg ? ReduceOp::sum : op;
    groups.communicator->reduce(input, output, count, type, summing, 0, stream);
    if (groups.leaders) {
      runtime.synchronize(stream, device);
      CollectiveOptions across = options;
      across.algorithm = "auto";
      allreduce(*groups.leaders, output, output, count, type, summing, across);
    }
    groups.communicator->broadcast(output, count, type, 0, stream);
    if (op == ReduceOp::avg) {
      runtime.synchronize(stream, device);
      runtime.backend(device).average(type, static_cast<std::byte*>(output), count,
                                      static_cast<size_t>(context.size()));
    }
  }
  // A blocking allreduce returns with the result in place.
  runtime.synchronize(stream, device);
}

}  // namespace chorus::detail
