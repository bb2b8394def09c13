// The meaning of the steps that run on the calling thread (reduce, copy) and
// of the final touch of a collective (averaging). The Executor and the
// simulator both call these, so a Plan computes the same bytes in both.
#pragma once

#include <cstddef>

#include "algorithms/model/call.h"
#include "algorithms/model/plan.h"
#include "memory/memory_backend.h"

namespace chorus::algorithms {

// The three buffers a Plan's regions point into, and the backend of the
// memory they live in. For an in-place call input and output are the same memory.
struct PlanBuffers {
  const std::byte* input = nullptr;
  std::byte* output = nullptr;
  std::byte* scratch = nullptr;
  MemoryBackend* backend = nullptr;

  const std::byte* read(const Region& region) const;
  std::byte* write(const Region& region) const;  // output or scratch only
};

// Runs a reduce or copy step: reduce is `to = to op from` element-wise.
void run_local_step(const Step& step, const Call& call, const PlanBuffers& buffers);

// What is left after the Plan finished: an average divides the sum by the
// number of ranks, on the ranks that hold a result (all for allreduce, the
// root for reduce, each rank's own block for reduce_scatter).
void finish_collective(const Call& call, void* output, MemoryBackend& backend);

}  // namespace chorus::algorithms
