// Recursive-halving reduce-scatter as a Plan.
//
// The survivors of the power-of-two fold own groups of blocks: new rank i
// owns the blocks of the ranks it stands for (itself and a folded-out
// partner), which are contiguous in rank order. Partial sums of other ranks'
// blocks are built in scratch, this rank's own block straight in the output.
// So that scratch stays bounded the job works through the buffer in pieces:
// piece k takes the k-th slice of every block, and two pieces alternate
// between two scratch areas.
#include "algorithms/plans/reduce_scatter/recursive_halving_reduce_scatter.h"

#include <algorithm>

#include "algorithms/model/power_of_two_fold.h"
#include "algorithms/model/recursive_phases.h"
#include "algorithms/model/reduction_segments.h"
#include "algorithms/plans/reduce_scatter/ring_reduce_scatter.h"

namespace chorus::algorithms {

namespace {

size_t piece_count(const Call& call, size_t piece_bytes) {
  const size_t total = call.total_count() * call.element_bytes();
  return std::max<size_t>(1, (total + piece_bytes - 1) / piece_bytes);
}

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

bool recursive_halving_reduce_scatter_supports(const Call& call) { return reduce_scatter_call_is_valid(call); }

double recursive_halving_reduce_scatter_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const PowerOfTwoFold fold(0, call.size);
  const double bytes = static_cast<double>(call.total_count() * call.element_bytes());
  const double power = fold.power();
  const double pieces = static_cast<double>(piece_count(call, piece_bytes_for(PlanTuning{}, call.element_bytes())));
  const double per_byte = model.beta_seconds_per_byte + model.gamma_seconds_per_byte;
  double cost = pieces * log2_of_power(fold.power()) * model.alpha_seconds + (power - 1) / power * bytes * per_byte;
  if (fold.extras() > 0)
    cost += pieces * 2 * model.alpha_seconds + bytes * per_byte + bytes / call.size * model.beta_seconds_per_byte;
  return cost;
}

Plan recursive_halving_reduce_scatter_plan(const Call& call, const PlanTuning& tuning) {
  Plan plan;
  const int size = call.size, rank = call.rank;
  if (call.total_count() == 0) return plan;
  const size_t element_bytes = call.element_bytes();
  const size_t segment_bytes = segment_bytes_for(tuning.segment_bytes, element_bytes);
  const size_t pieces = piece_count(call, piece_bytes_for(tuning, element_bytes));
  const PowerOfTwoFold fold(rank, size);

  // Slice of block b in every piece (the last slices may be shorter or empty).
  std::vector<size_t> slice(static_cast<size_t>(size));
  size_t lane_bytes = 0, piece_bytes = 0;
  for (int b = 0; b < size; ++b) {
    slice[b] = ceil_div(call.block_count(b), pieces);
    if (b != rank) lane_bytes += slice[b] * element_bytes;
    piece_bytes += slice[b] * element_bytes;
  }
  const size_t lanes = std::min<size_t>(2, pieces);
  // The same on every rank: it bounds the messages that a round packs its segments into.
  ReceiveSlots receive_slots(lanes * lane_bytes, std::min(segment_bytes, piece_bytes), tuning.scratch_segments);
  if (size > 1) plan.scratch_bytes = lanes * lane_bytes + receive_slots.bytes();
  MessageSlots slots(size);
  std::vector<StepId> lane_free(lanes, no_step);

  // The block whose result travels between this rank and its fold partner.
  const int folded_block = fold.folded_out() ? rank : fold.takes_partner() ? fold.partner() : -1;
  for (size_t piece = 0; piece < pieces; ++piece) {
    const size_t lane = piece % lanes;
    std::vector<Segment> pieces_of_blocks;
    size_t cursor = lane * lane_bytes, folded_first = 0, folded_last = 0, own_first = 0, own_last = 0;
    for (int b = 0; b < size; ++b) {
      const size_t first = std::min(call.block_count(b), piece * slice[b]);
      const size_t length = (std::min(call.block_count(b), first + slice[b]) - first) * element_bytes;
      const Region own{BufferKind::input, (call.block_offset(b) + first) * element_bytes, length};
      Region accumulator{BufferKind::output, first * element_bytes, length};
      if (b != rank) {
        accumulator = Region{BufferKind::scratch, cursor, length};
        cursor += slice[b] * element_bytes;
      }
      const size_t begin = pieces_of_blocks.size();
      add_segments(pieces_of_blocks, fold.new_rank_of_relative(b), own, accumulator, segment_bytes);
      if (b == folded_block) folded_first = begin, folded_last = pieces_of_blocks.size();
      if (b == rank) own_first = begin, own_last = pieces_of_blocks.size();
    }
    SegmentedReduction segments(plan, call, slots, receive_slots, std::move(pieces_of_blocks), fold.power(),
                                lane_free[lane]);
    // A piece of several takes a slice of every block: no two blocks' slices follow each other.
    segments.set_packing(pieces == 1);
    fold_in(segments, fold);
    if (!fold.folded_out()) reduce_scatter_by_halving(segments, fold);
    fold_out(segments, fold, folded_first, folded_last);
    for (size_t s = own_first; s < own_last; ++s) segments.settle(s);
    lane_free[lane] = segments.finished();
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions recursive_halving_reduce_scatter{recursive_halving_reduce_scatter_supports,
                                                              recursive_halving_reduce_scatter_cost,
                                                              recursive_halving_reduce_scatter_plan};

}  // namespace chorus::algorithms
