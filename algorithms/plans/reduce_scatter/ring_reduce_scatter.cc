// Ring reduce-scatter as a Plan.
//
// Rank r starts by sending its input of block r-1; in step k (1..P-1) it
// receives the partial of block r-1-k from the left, adds its input of that
// block and passes it on, except in the last step, where the block is its
// own: that one lands in the output. Blocks are cut into segments that travel the ring
// independently; partials wait in a few scratch slots reused round robin, so
// scratch stays bounded for any buffer.
#include "algorithms/plans/reduce_scatter/ring_reduce_scatter.h"

#include <algorithm>

#include "algorithms/model/reduction_segments.h"

namespace chorus::algorithms {

bool reduce_scatter_call_is_valid(const Call& call) {
  return call.collective == Collective::reduce_scatter && !call.in_place &&
         (call.counts.empty() || call.counts.size() == static_cast<size_t>(call.size));
}

namespace {

bool ring_reduce_scatter_supports(const Call& call) { return reduce_scatter_call_is_valid(call); }

double ring_reduce_scatter_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const double ranks = call.size;
  const double bytes = static_cast<double>(call.total_count() * call.element_bytes());
  return (ranks - 1) * model.alpha_seconds +
         (ranks - 1) / ranks * bytes * (model.beta_seconds_per_byte + model.gamma_seconds_per_byte);
}

Plan ring_reduce_scatter_plan(const Call& call, const PlanTuning& tuning) {
  Plan plan;
  const int size = call.size, rank = call.rank;
  const size_t element_bytes = call.element_bytes();
  const size_t segment_bytes = segment_bytes_for(tuning.segment_bytes, element_bytes);
  auto block_region = [&](BufferKind buffer, int block) {
    const size_t offset = buffer == BufferKind::input ? call.block_offset(block) * element_bytes : 0;
    return Region{buffer, offset, call.block_count(block) * element_bytes};
  };
  auto segments_of = [&](const Region& region) {
    std::vector<Region> segments;
    for (size_t first = 0; first < region.length; first += segment_bytes)
      segments.push_back(Region{region.buffer, region.offset + first, std::min(segment_bytes, region.length - first)});
    return segments;
  };
  if (size == 1) {
    if (call.block_count(0) > 0) plan.copy(block_region(BufferKind::input, 0), block_region(BufferKind::output, 0));
    return plan;
  }

  size_t largest_block = 0;
  for (int block = 0; block < size; ++block) largest_block = std::max(largest_block, call.block_count(block));
  ReceiveSlots partials(0, std::min(segment_bytes, largest_block * element_bytes), tuning.scratch_segments);
  if (largest_block > 0) plan.scratch_bytes = partials.bytes();
  MessageSlots slots(size);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  // Block passed on in step k (received in step k-1); step P-1 is only a receive.
  auto block_of_step = [&](int step) { return ((rank - 1 - step) % size + size) % size; };
  std::vector<std::vector<Region>> inputs(static_cast<size_t>(size));
  size_t most_segments = 0;
  for (int step = 0; step < size; ++step) {
    inputs[step] = segments_of(block_region(BufferKind::input, block_of_step(step)));
    most_segments = std::max(most_segments, inputs[step].size());
  }
  const std::vector<Region> outputs = segments_of(block_region(BufferKind::output, rank));

  // Segment-major order: segment s goes through every step before segment
  // s+1 starts. A partial holds its scratch slot until it has been sent on,
  // so a receive waits for one of this rank's sends; in step-major order that
  // send would sit behind a whole block of first-step sends, on every rank at
  // once, and the ring would deadlock once a block has more segments than
  // there are slots.
  for (size_t s = 0; s < most_segments; ++s) {
    if (s < inputs[0].size()) plan.send(inputs[0][s], right, slots.next_send(call, right));
    for (int step = 1; step < size; ++step) {
      if (s >= inputs[step].size()) continue;
      const Region& input = inputs[step][s];
      if (step == size - 1) {
        StepId received = plan.recv(left, slots.next_recv(call, left), outputs[s]);
        plan.reduce(input, outputs[s], {received});
        continue;
      }
      ReceiveSlots::Lease lease = partials.acquire(input.length);
      StepId received = plan.recv(left, slots.next_recv(call, left), lease.region, {lease.free_after});
      StepId reduced = plan.reduce(input, lease.region, {received});
      partials.release(lease, plan.send(lease.region, right, slots.next_send(call, right), {reduced}));
    }
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions ring_reduce_scatter{ring_reduce_scatter_supports, ring_reduce_scatter_cost,
                                                 ring_reduce_scatter_plan};

}  // namespace chorus::algorithms
