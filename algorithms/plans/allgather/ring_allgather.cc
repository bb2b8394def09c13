// Ring allgather as a Plan.
//
// In step k rank r sends block r-k to r+1 and receives block r-k-1 from r-1
// straight into the output. Blocks are cut into segments that travel the ring
// independently, so a rank forwards the first segments of a block while the
// rest is still arriving. Empty blocks (allgatherv zeros) send nothing: every
// rank knows every count, so both sides skip the same messages.
#include "algorithms/plans/allgather/ring_allgather.h"

#include "algorithms/model/block_layout.h"

namespace chorus::algorithms {

void append_ring_allgather(Plan& plan, const RingAllgatherStage& stage) {
  const int size = stage.size, position = stage.position;
  if (size <= 1) return;
  uint32_t send_slot = stage.first_slot, recv_slot = stage.first_slot;

  for_each_segment(stage.own_source, stage.segment_bytes,
                   [&](Region piece) { plan.send(piece, stage.right, send_slot++, {stage.own_ready}); });

  for (int step = 0; step < size - 1; ++step) {
    const int block = wrap_rank(static_cast<long long>(position) - step - 1, size);
    const StepId writable = stage.writable_after.empty() ? no_step : stage.writable_after[block];
    const bool forward = step < size - 2;  // the last block received stops here
    for_each_segment(stage.blocks[block], stage.segment_bytes, [&](Region piece) {
      StepId received = plan.recv(stage.left, recv_slot++, piece, {writable});
      if (forward) plan.send(piece, stage.right, send_slot++, {received});
    });
  }
}

namespace {

bool ring_allgather_supports(const Call& call) { return call.collective == Collective::allgather; }

double ring_allgather_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const double ranks = call.size;
  const double bytes = static_cast<double>(call.total_count() * call.element_bytes());
  return (ranks - 1) * model.alpha_seconds + (ranks - 1) / ranks * bytes * model.beta_seconds_per_byte;
}

Plan ring_allgather_plan(const Call& call, const PlanTuning& tuning) {
  Plan plan;
  const int size = call.size, rank = call.rank;
  const size_t element = call.element_bytes();
  const std::vector<size_t> offsets = prefix_byte_offsets(block_counts(call), element);
  const Region own = block_range(BufferKind::output, offsets, rank, rank + 1);

  RingAllgatherStage stage;
  stage.position = rank;
  stage.size = size;
  stage.left = wrap_rank(rank - 1, size);
  stage.right = wrap_rank(rank + 1, size);
  stage.segment_bytes = segment_bytes_of(tuning, element);
  size_t messages = 0;
  for (int r = 0; r < size; ++r) {
    stage.blocks.push_back(block_range(BufferKind::output, offsets, r, r + 1));
    messages += segment_count(stage.blocks.back().length, stage.segment_bytes);
  }
  check_message_count(call, messages, "ring");
  // Out of place the first send reads the input directly, in parallel with
  // the copy of this rank's block into the output.
  stage.own_source = call.in_place ? own : Region{BufferKind::input, 0, own.length};
  if (!call.in_place && own.length > 0) plan.copy(stage.own_source, own);
  append_ring_allgather(plan, stage);
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions ring_allgather{ring_allgather_supports, ring_allgather_cost, ring_allgather_plan};

}  // namespace chorus::algorithms
