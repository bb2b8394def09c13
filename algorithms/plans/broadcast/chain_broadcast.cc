// Pipelined chain broadcast as a Plan: relative rank v receives each segment
// from v-1 and forwards it to v+1 as soon as it has arrived.
#include "algorithms/plans/broadcast/chain_broadcast.h"

#include "algorithms/model/block_layout.h"
#include "algorithms/model/segment_size.h"

namespace chorus::algorithms {

namespace {

bool chain_broadcast_supports(const Call& call) {
  return call.collective == Collective::broadcast && call.root >= 0 && call.root < call.size;
}

PlanTuning chain_broadcast_tuning(const Call& call, const CostModel& model) {
  PlanTuning tuning;
  // The first segment crosses P - 2 links before the last link starts.
  tuning.segment_bytes = pipeline_segment_bytes(call.bytes(), call.element_bytes(), call.size - 2, model);
  return tuning;
}

double chain_broadcast_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  // Exactly the segments chain_broadcast_plan cuts with this tuning.
  const size_t segment = segment_bytes_of(chain_broadcast_tuning(call, model), call.element_bytes());
  const double segments = static_cast<double>(std::max<size_t>(1, segment_count(call.bytes(), segment)));
  const double bytes = static_cast<double>(call.bytes());
  const double critical = (call.size - 2 + segments) * lone_message_seconds(model, bytes / segments);
  // Each of the P - 1 links carries every segment.
  const double links = call.size - 1;
  return bounded_by_shared_cores(model, call.size, critical, links * segments, links * bytes);
}

Plan chain_broadcast_plan(const Call& call, const PlanTuning& tuning) {
  Plan plan;
  plan.one_way = true;
  const int size = call.size;
  if (size == 1 || call.count == 0) return plan;
  const int relative = wrap_rank(static_cast<long long>(call.rank) - call.root, size);
  const int previous = relative == 0 ? -1 : wrap_rank(call.rank - 1, size);
  const int next = relative == size - 1 ? -1 : wrap_rank(call.rank + 1, size);
  const size_t segment = segment_bytes_of(tuning, call.element_bytes());
  check_message_count(call, segment_count(call.bytes(), segment), "chain");

  uint32_t slot = 0;
  for_each_segment(Region{BufferKind::output, 0, call.bytes()}, segment, [&](Region piece) {
    const StepId received = previous < 0 ? no_step : plan.recv(previous, slot, piece);
    if (next >= 0) plan.send(piece, next, slot, {received});
    ++slot;
  });
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions chain_broadcast{chain_broadcast_supports, chain_broadcast_cost, chain_broadcast_plan,
                                             chain_broadcast_tuning};

}  // namespace chorus::algorithms
