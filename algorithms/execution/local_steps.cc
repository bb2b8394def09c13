// Reduce and copy steps, and the final averaging.
#include "algorithms/execution/local_steps.h"

#include <stdexcept>

namespace chorus::algorithms {

const std::byte* PlanBuffers::read(const Region& region) const {
  switch (region.buffer) {
    case BufferKind::input: return input + region.offset;
    case BufferKind::output: return output + region.offset;
    case BufferKind::scratch: return scratch + region.offset;
  }
  throw std::logic_error("plan region names an unknown buffer");
}

std::byte* PlanBuffers::write(const Region& region) const {
  switch (region.buffer) {
    case BufferKind::output: return output + region.offset;
    case BufferKind::scratch: return scratch + region.offset;
    case BufferKind::input: break;
  }
  throw std::logic_error("plan step writes into the caller's input buffer");
}

void run_local_step(const Step& step, const Call& call, const PlanBuffers& buffers) {
  if (step.to.length == 0) return;
  std::byte* destination = buffers.write(step.to);
  const std::byte* source = buffers.read(step.from);
  if (step.kind == StepKind::copy) {
    buffers.backend->copy(destination, source, step.to.length);
    return;
  }
  if (step.kind != StepKind::reduce) throw std::logic_error("run_local_step given a communication step");
  buffers.backend->reduce(call.type, call.op, destination, source, step.to.length / element_size(call.type));
}

void finish_collective(const Call& call, void* output, MemoryBackend& backend) {
  if (call.op != ReduceOp::avg || call.size <= 1) return;
  // Only the elements this rank ends up holding were summed: the whole buffer
  // of an allreduce, the root's buffer of a reduce (other ranks' outputs are
  // not touched), this rank's block of a reduce_scatter.
  size_t elements = 0;
  if (call.collective == Collective::allreduce) elements = call.count;
  if (call.collective == Collective::reduce && call.rank == call.root) elements = call.count;
  if (call.collective == Collective::reduce_scatter) elements = call.block_count(call.rank);
  if (elements > 0) backend.average(call.type, static_cast<std::byte*>(output), elements, static_cast<size_t>(call.size));
}

}  // namespace chorus::algorithms
