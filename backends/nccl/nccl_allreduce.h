// allreduce on CUDA memory through NCCL, the backend "nccl" (backends/registry.h),
// when the caller names it (docs/cuda.md). Within a host, the ranks' NCCL
// communicator does the work (NVLink, NCCL's own kernels); across hosts,
// NCCL reduces to each host's first rank, those ranks allreduce with
// chorus, and NCCL broadcasts the result back. The communicators are made
// by the first such call on a Communicator (nccl_groups.h).
//
// Host memory and bitwise ops (NCCL's gap) are an InvalidArgument, raised
// before anything moves. Collective on every member, like the allreduce it is.
#pragma once

#include <cstdint>
#include <string>

#include "backends/registry.h"
#include "base/deadline.h"

namespace chorus::backends {

// Why NCCL cannot run the call (host memory, a bitwise op); empty: it can.
std::string nccl_refuses(const Communicator& communicator, const Call& call);

void nccl_allreduce(const Communicator& communicator, const Call& call, const void* input, void* output,
                    uint32_t sequence, Deadline deadline);

}  // namespace chorus::backends
