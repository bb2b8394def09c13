// Every member's buffers of one call, mapped into this process: the first
// step of the mapped collectives (mapped_allreduce.h, mapped_leader.h),
// where each rank, or one rank for all, reads and writes its peers' device
// memory itself (Device::map_peer_memory: CUDA IPC between processes on one
// host).
//
// The ranks gather each other's descriptions of their input and output in a
// per-call helper group. A rank sends its own only once its inputs are
// ready (the caller ordered the call after its stream), so the gather is
// also the barrier before anybody reads them. The helper group also runs
// the later barriers, so every step of a call has its own sequence there.
//
// Every member's input (and output) must be the same size: the v variants
// do not run mapped. An empty buffer (a broadcast's input) is not exported;
// its pointer is null everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/execution/communicator.h"
#include "algorithms/model/call.h"
#include "base/deadline.h"

namespace chorus::algorithms {

class MappedPeers {
 public:
  // Gathers and maps (A). `input_bytes` and `output_bytes` are every
  // member's alike.
  MappedPeers(const Communicator& communicator, const Call& call, const void* input, size_t input_bytes, void* output,
              size_t output_bytes, uint32_t sequence, Deadline deadline);

  int rank() const { return communicator_.rank(); }
  int size() const { return communicator_.size(); }
  // Member p's buffers, mapped here (this rank's own as given).
  const std::byte* input(int p) const { return inputs_[static_cast<size_t>(p)]; }
  std::byte* output(int p) const { return outputs_[static_cast<size_t>(p)]; }
  // A barrier of the helper group; `step` numbers it within the call (from 1).
  void barrier(uint32_t step) const;

 private:
  const Communicator& communicator_;
  const Call& call_;
  const Deadline deadline_;
  const Communicator helpers_;
  std::vector<const std::byte*> inputs_;
  std::vector<std::byte*> outputs_;
};

}  // namespace chorus::algorithms
