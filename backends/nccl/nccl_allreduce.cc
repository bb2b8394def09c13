// The NCCL backend of allreduce.
#include "backends/nccl/nccl_allreduce.h"

#include <string>

#include <cstddef>

#include "algorithms/run.h"
#include "backends/nccl/nccl_groups.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/cuda/runtime.h"

namespace chorus::backends {

using algorithms::checked_call;
using algorithms::make_call;
using algorithms::run_collective;

std::string nccl_refuses(const Communicator& communicator, const Call& call) {
  const int rank = communicator.rank();
  if (call.memory.kind != MemoryKind::cuda)
    return cat("rank ", rank, ": allreduce with algorithm nccl needs CUDA memory (the options say ",
               to_string(call.memory), ")");
  const ReduceOp op = call.op;
  if (op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor)
    return cat("rank ", rank, ": allreduce with algorithm nccl: NCCL has no ", to_string(op), " reduction");
  return {};
}

void nccl_allreduce(const Communicator& communicator, const Call& call, const void* input, void* output,
                    uint32_t sequence, Deadline deadline) {
  if (std::string refused = nccl_refuses(communicator, call); !refused.empty()) throw InvalidArgument(refused);
  const ReduceOp op = call.op;
  const int device = call.memory.device;
  NcclGroups& groups = nccl_groups(communicator, device, sequence, deadline);
  cuda::Runtime& runtime = cuda::cuda_runtime();
  void* stream = call.stream;
  const size_t count = call.count;
  // NCCL queues on the caller's stream: ordered after its work as it is.
  if (communicator.topology().hosts() == 1) {
    groups.local->allreduce(input, output, count, call.type, op, stream);
  } else {
    const ReduceOp summing = op == ReduceOp::avg ? ReduceOp::sum : op;
    groups.local->reduce(input, output, count, call.type, summing, 0, stream);
    if (groups.leaders) {
      runtime.synchronize(stream, device);
      const Communicator& leaders = *groups.leaders;
      Call across = make_call(Collective::allreduce, leaders.rank(), leaders.size(), count, call.type, summing, 0,
                              /*in_place=*/true);
      across.memory = call.memory;
      run_collective(leaders, checked_call(leaders, across, output, output), output, output, "auto",
                     groups.leaders_sequence++, deadline);
    }
    groups.local->broadcast(output, count, call.type, 0, stream);
    if (op == ReduceOp::avg) {
      runtime.synchronize(stream, device);
      runtime.backend(device).average(call.type, static_cast<std::byte*>(output), count,
                                      static_cast<size_t>(communicator.size()));
    }
  }
  // The call returns with the result in place, async or not.
  runtime.synchronize(stream, device);
}

}  // namespace chorus::backends
