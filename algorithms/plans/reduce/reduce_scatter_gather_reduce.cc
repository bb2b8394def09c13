// Reduce-scatter-gather reduce as a Plan.
//
// The buffer is worked through in pieces (the same on every rank); each piece
// is cut into P' groups, reduced by recursive halving so that new rank i holds
// group i, then gathered to new rank 0, which is the root. The root builds the
// result in its output; the others build their partial sums in scratch (their
// outputs must stay untouched), two pieces' worth at most.
#include "algorithms/plans/reduce/reduce_scatter_gather_reduce.h"

#include <algorithm>

#include "algorithms/model/power_of_two_fold.h"
#include "algorithms/model/recursive_phases.h"
#include "algorithms/model/reduction_segments.h"

namespace chorus::algorithms {

namespace {

bool reduce_scatter_gather_reduce_supports(const Call& call) {
  return call.collective == Collective::reduce && call.root >= 0 && call.root < call.size;
}

double reduce_scatter_gather_reduce_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const PowerOfTwoFold fold(0, call.size);
  const double bytes = static_cast<double>(call.bytes());
  const double power = fold.power();
  const size_t piece_bytes = piece_bytes_for(PlanTuning{}, call.element_bytes());
  const double pieces = static_cast<double>(std::max<size_t>(1, (call.bytes() + piece_bytes - 1) / piece_bytes));
  double cost = pieces * 2 * log2_of_power(fold.power()) * model.alpha_seconds +
                (power - 1) / power * bytes * (2 * model.beta_seconds_per_byte + model.gamma_seconds_per_byte);
  if (fold.extras() > 0)
    cost += pieces * model.alpha_seconds + bytes * (model.beta_seconds_per_byte + model.gamma_seconds_per_byte);
  return cost;
}

Plan reduce_scatter_gather_reduce_plan(const Call& call, const PlanTuning& tuning) {
  Plan plan;
  if (call.count == 0) return plan;
  const size_t element_bytes = element_size(call.type);
  const size_t segment_bytes = segment_bytes_for(tuning.segment_bytes, element_bytes);
  const size_t piece_bytes = piece_bytes_for(tuning, element_bytes);
  const size_t pieces = (call.bytes() + piece_bytes - 1) / piece_bytes;
  const BufferKind own_buffer = call.in_place ? BufferKind::output : BufferKind::input;
  const PowerOfTwoFold fold(call.rank, call.size, call.root);
  const bool root = call.rank == call.root;

  const size_t lanes = root || fold.folded_out() ? 0 : std::min<size_t>(2, pieces);
  const size_t lane_bytes = std::min(piece_bytes, call.bytes());
  ReceiveSlots receive_slots(lanes * lane_bytes, std::min(segment_bytes, call.bytes()), tuning.scratch_segments);
  if (call.size > 1 && !fold.folded_out()) plan.scratch_bytes = lanes * lane_bytes + receive_slots.bytes();
  MessageSlots slots(call.size);
  std::vector<StepId> lane_free(std::max<size_t>(1, lanes), no_step);

  for (size_t piece = 0; piece < pieces; ++piece) {
    const size_t piece_offset = piece * piece_bytes;
    const size_t piece_count = std::min(piece_bytes, call.bytes() - piece_offset) / element_bytes;
    const size_t lane = lanes > 0 ? piece % lanes : 0;
    std::vector<Segment> pieces_of_groups;
    size_t offset = 0;
    for (int group = 0; group < fold.power(); ++group) {
      const size_t length = halving_group_elements(piece_count, fold.power(), group) * element_bytes;
      const Region own{own_buffer, piece_offset + offset, length};
      Region accumulator = own;  // a folded-out rank only sends its own data
      if (root) accumulator = Region{BufferKind::output, piece_offset + offset, length};
      if (lanes > 0) accumulator = Region{BufferKind::scratch, lane * lane_bytes + offset, length};
      add_segments(pieces_of_groups, group, own, accumulator, segment_bytes);
      offset += length;
    }
    SegmentedReduction segments(plan, call, slots, receive_slots, std::move(pieces_of_groups), fold.power(),
                                lane_free[lane]);
    fold_in(segments, fold);
    if (!fold.folded_out()) {
      reduce_scatter_by_halving(segments, fold);
      gather_to_first(segments, fold);
    }
    if (root)
      for (size_t s = 0; s < segments.size(); ++s) segments.settle(s);
    if (lanes > 0) lane_free[lane] = segments.finished();
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions reduce_scatter_gather_reduce{reduce_scatter_gather_reduce_supports,
                                                          reduce_scatter_gather_reduce_cost,
                                                          reduce_scatter_gather_reduce_plan};

}  // namespace chorus::algorithms
