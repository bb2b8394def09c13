// allreduce on CUDA memory through NCCL, when the caller asks for it
// (CollectiveOptions::algorithm = "nccl"; docs/cuda.md). Within a host, the
// ranks' NCCL communicator does the work (NVLink, NCCL's own kernels);
// across hosts, NCCL reduces to each host's first rank, those ranks
// allreduce with chorus, and NCCL broadcasts the result back. The
// communicators are built from the Context itself (its split by host, and
// NCCL's unique id broadcast over it), once, on the first such call.
//
// NCCL needs each rank of a host on its own GPU: ranks sharing one are an
// InvalidArgument naming them (cuda_ipc serves them instead). Bitwise ops
// are NCCL's gap and an InvalidArgument too. Collective on every rank, like
// the allreduce it is. Internal.
#pragma once

#include <cstddef>

#include "base/types.h"
#include "chorus/collective_options.h"
#include "chorus/context.h"

namespace chorus::detail {

void nccl_allreduce(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                    const CollectiveOptions& options);

}  // namespace chorus::detail
