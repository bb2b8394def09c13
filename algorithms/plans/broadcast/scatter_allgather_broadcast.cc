// Scatter + ring allgather broadcast as a Plan.
//
// Everything happens in the output buffer (broadcast has no input): the
// scatter lands each subtree's chunk range where it belongs, and the ring
// allgather then fills the rest. Chunks are numbered by relative rank, so a
// subtree's chunks are contiguous and each scatter message is one region.
// A rank also receives, in the allgather, the chunks of its subtree it had
// forwarded; those receives wait until the forwarding sends are done.
#include "algorithms/plans/broadcast/scatter_allgather_broadcast.h"

#include "algorithms/model/block_layout.h"
#include "algorithms/plans/allgather/ring_allgather.h"
#include "algorithms/plans/allreduce/ring_allreduce.h"

namespace chorus::algorithms {

int scatter_subtree_end(int relative, int size) {
  if (relative == 0) return size;
  return static_cast<int>(std::min<long long>(size, static_cast<long long>(relative) + lowest_bit(relative)));
}

namespace {

bool scatter_allgather_broadcast_supports(const Call& call) {
  return call.collective == Collective::broadcast && call.root >= 0 && call.root < call.size;
}

double scatter_allgather_broadcast_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const double ranks = call.size;
  const double bytes = static_cast<double>(call.bytes());
  const double share = (ranks - 1) / ranks * bytes;
  const double critical =
      (ceil_log2(call.size) + ranks - 1) * model.alpha_seconds + 2 * share * lone_beta_seconds_per_byte(model);
  if (!model.shares_cores()) return critical;
  // The scatter sends each subtree's chunks down its edge (one message per
  // rank but the root); in the ring every rank receives all chunks but its own.
  double scattered_chunks = 0;
  for (int relative = 1; relative < call.size; ++relative)
    scattered_chunks += scatter_subtree_end(relative, call.size) - relative;
  const double messages = (ranks - 1) + ranks * (ranks - 1);
  return bounded_by_shared_cores(model, call.size, critical, messages,
                                 scattered_chunks / ranks * bytes + (ranks - 1) * bytes);
}

Plan scatter_allgather_broadcast_plan(const Call& call, const PlanTuning& tuning) {
  Plan plan;
  const int size = call.size;
  if (size == 1 || call.count == 0) return plan;
  const size_t element = call.element_bytes();
  const int relative = wrap_rank(static_cast<long long>(call.rank) - call.root, size);
  auto absolute = [&](int v) { return wrap_rank(static_cast<long long>(v) + call.root, size); };

  std::vector<size_t> chunk_counts(static_cast<size_t>(size));
  for (int chunk = 0; chunk < size; ++chunk) chunk_counts[chunk] = ring_chunk_elements(call.count, size, chunk);
  const std::vector<size_t> offsets = prefix_byte_offsets(chunk_counts, element);

  // The scatter uses slot 0 (one message per tree edge); the ring numbers
  // its messages from 1.
  const int subtree_end = scatter_subtree_end(relative, size);
  StepId received = no_step;
  if (relative != 0) {
    const Region mine = block_range(BufferKind::output, offsets, relative, subtree_end);
    if (mine.length > 0) received = plan.recv(absolute(relative - lowest_bit(relative)), 0, mine);
  }
  std::vector<StepId> writable_after(static_cast<size_t>(size), received);
  // Children v + 2^j for 2^j below v's lowest bit, the largest subtree first.
  int step_size = 1;
  while (step_size * 2 < (relative == 0 ? size : lowest_bit(relative))) step_size *= 2;
  for (; step_size >= 1; step_size /= 2) {
    const int child = relative + step_size;
    if (child >= size || (relative != 0 && step_size >= lowest_bit(relative))) continue;
    const int child_end = scatter_subtree_end(child, size);
    const Region range = block_range(BufferKind::output, offsets, child, child_end);
    if (range.length == 0) continue;
    const StepId sent = plan.send(range, absolute(child), 0, {received});
    for (int chunk = child; chunk < child_end; ++chunk) writable_after[chunk] = sent;
  }

  RingAllgatherStage ring;
  ring.position = relative;
  ring.size = size;
  ring.left = absolute(wrap_rank(relative - 1, size));
  ring.right = absolute(wrap_rank(relative + 1, size));
  size_t messages = 1;
  ring.segment_bytes = segment_bytes_of(tuning, element);
  for (int chunk = 0; chunk < size; ++chunk) {
    ring.blocks.push_back(block_range(BufferKind::output, offsets, chunk, chunk + 1));
    messages += segment_count(ring.blocks.back().length, ring.segment_bytes);
  }
  check_message_count(call, messages, "scatter_allgather");
  ring.own_source = ring.blocks[relative];
  ring.own_ready = received;
  ring.writable_after = std::move(writable_after);
  ring.first_slot = 1;
  append_ring_allgather(plan, ring);
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions scatter_allgather_broadcast{scatter_allgather_broadcast_supports,
                                                         scatter_allgather_broadcast_cost,
                                                         scatter_allgather_broadcast_plan};

}  // namespace chorus::algorithms
