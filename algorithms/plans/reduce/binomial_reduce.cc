// Binomial-tree reduce as a Plan.
//
// Ranks are renumbered relative to the root (v = rank - root mod P). v's
// children are v + 2^j for every j below v's lowest set bit (every j for the
// root), its parent is v with the lowest set bit cleared: the mirror image of
// the binomial broadcast. The root sums into its output; an inner rank sums
// into scratch (its output must stay untouched), a piece of the buffer at a
// time so scratch stays bounded; a leaf sends its own data as it is.
#include "algorithms/plans/reduce/binomial_reduce.h"

#include <algorithm>

#include "algorithms/model/reduction_segments.h"

namespace chorus::algorithms {

namespace {

bool binomial_reduce_supports(const Call& call) {
  return call.collective == Collective::reduce && call.root >= 0 && call.root < call.size;
}

double binomial_reduce_cost(const Call& call, const CostModel& model) {
  const double bytes = static_cast<double>(call.bytes());
  return ceil_log2(call.size) *
         (model.alpha_seconds + bytes * (model.beta_seconds_per_byte + model.gamma_seconds_per_byte));
}

Plan binomial_reduce_plan(const Call& call, const PlanTuning& tuning) {
  Plan plan;
  const int size = call.size;
  if (call.count == 0) return plan;
  const size_t element_bytes = element_size(call.type);
  const size_t segment_bytes = segment_bytes_for(tuning.segment_bytes, element_bytes);
  const BufferKind own_buffer = call.in_place ? BufferKind::output : BufferKind::input;

  const int relative = ((call.rank - call.root) % size + size) % size;
  auto absolute = [&](int v) { return (v + call.root) % size; };
  std::vector<int> children;
  for (int bit = 1; relative + bit < size && (relative & bit) == 0; bit *= 2)
    children.push_back(absolute(relative + bit));
  const int parent = relative == 0 ? -1 : absolute(relative - (relative & -relative));

  // The root's accumulator is its output and a leaf needs none: one piece.
  const bool inner = parent >= 0 && !children.empty();
  const size_t piece_bytes = inner ? piece_bytes_for(tuning, element_bytes) : call.bytes();
  const size_t pieces = (call.bytes() + piece_bytes - 1) / piece_bytes;
  const size_t lanes = inner ? std::min<size_t>(2, pieces) : 0;
  const size_t lane_bytes = std::min(piece_bytes, call.bytes());
  ReceiveSlots receive_slots(lanes * lane_bytes, std::min(segment_bytes, call.bytes()), tuning.scratch_segments);
  if (!children.empty()) plan.scratch_bytes = lanes * lane_bytes + receive_slots.bytes();
  MessageSlots slots(size);
  std::vector<StepId> lane_free(std::max<size_t>(1, lanes), no_step);

  for (size_t piece = 0; piece < pieces; ++piece) {
    const size_t offset = piece * piece_bytes, length = std::min(piece_bytes, call.bytes() - offset);
    const Region own{own_buffer, offset, length};
    Region accumulator = own;
    if (parent < 0) accumulator = Region{BufferKind::output, offset, length};
    if (inner) accumulator = Region{BufferKind::scratch, (piece % lanes) * lane_bytes, length};
    std::vector<Segment> pieces_of_buffer;
    add_segments(pieces_of_buffer, 0, own, accumulator, segment_bytes);
    const size_t lane = inner ? piece % lanes : 0;
    SegmentedReduction segments(plan, call, slots, receive_slots, std::move(pieces_of_buffer), 1, lane_free[lane]);
    for (int child : children)
      for (size_t s = 0; s < segments.size(); ++s) segments.accumulate(s, child);
    for (size_t s = 0; s < segments.size(); ++s) {
      if (parent >= 0)
        segments.send(s, parent);
      else
        segments.settle(s);
    }
    if (inner) lane_free[lane] = segments.finished();
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions binomial_reduce{binomial_reduce_supports, binomial_reduce_cost, binomial_reduce_plan};

}  // namespace chorus::algorithms
