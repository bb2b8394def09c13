// The NCCL communicators of one Communicator, made by its first call of the
// "nccl" allreduce and kept with it (Communicator::backend_states). Within
// a host, NCCL runs on the ranks of that host; across hosts, each host's
// first rank joins the leaders, a Communicator of chorus's own.
//
// The bootstrap is itself collective on every member: the host's ranks
// allgather their GPUs' PCI bus ids (NCCL needs a GPU per rank: ranks
// sharing one are an InvalidArgument naming them, raised before NCCL is
// touched), and the host's first rank broadcasts NCCL's unique id to the
// others. Both run as internal calls on a subgroup of the Communicator,
// whose group derives from the nccl call's own number, so every member
// computes it alike and nothing else shares it.
#pragma once

#include <cstdint>
#include <memory>

#include "algorithms/execution/backend_state.h"
#include "backends/registry.h"
#include "base/deadline.h"
#include "memory/cuda/runtime.h"

namespace chorus::backends {

using algorithms::BackendState;

struct NcclGroups : BackendState {
  int device = -1;
  std::unique_ptr<cuda::NcclCommunicator> local;  // the ranks of this host
  std::unique_ptr<Communicator> leaders;          // each host's first rank; null elsewhere, or on one host
  uint32_t leaders_sequence = 0;                  // the leaders' next collective
};

// This Communicator's groups on `device`, made by the first call (numbered
// `sequence`). Throws InvalidArgument for ranks of a host sharing a GPU, or
// when the groups were made on another device.
NcclGroups& nccl_groups(const Communicator& communicator, int device, uint32_t sequence, Deadline deadline);

}  // namespace chorus::backends
