// Rounds of the recursive reduction algorithms.
//
// Within a round the segments are handled in index order on both sides, and
// one round talks to one peer, so the sender's and the receiver's queues for
// that pair list the same messages in the same order. A round moves its
// segments in as few messages as the receive slots allow (send_run and the
// others), which both sides cut alike.
#include "algorithms/model/recursive_phases.h"

#include <algorithm>

namespace chorus::algorithms {

void fold_in(SegmentedReduction& segments, const PowerOfTwoFold& fold) {
  if (fold.folded_out())
    segments.send_run(0, segments.size(), fold.partner());
  else if (fold.takes_partner())
    segments.accumulate_run(0, segments.size(), fold.partner());
}

void exchange_all(SegmentedReduction& segments, const PowerOfTwoFold& fold) {
  const int me = fold.new_rank();
  for (int distance = 1; distance < fold.power(); distance *= 2) {
    const int peer = fold.rank_of(me ^ distance);
    segments.send_run(0, segments.size(), peer);
    segments.accumulate_run(0, segments.size(), peer);
  }
}

void reduce_scatter_by_halving(SegmentedReduction& segments, const PowerOfTwoFold& fold) {
  const int me = fold.new_rank();
  int first = 0, last = fold.power();
  for (int distance = fold.power() / 2; distance >= 1; distance /= 2) {
    const int peer = fold.rank_of(me ^ distance);
    const int middle = first + distance;
    const bool keep_upper = (me & distance) != 0;
    const int give_first = keep_upper ? first : middle, give_last = keep_upper ? middle : last;
    const int keep_first = keep_upper ? middle : first, keep_last = keep_upper ? last : middle;
    segments.send_groups(give_first, give_last, peer);
    segments.accumulate_groups(keep_first, keep_last, peer);
    first = keep_first;
    last = keep_last;
  }
}

void allgather_by_doubling(SegmentedReduction& segments, const PowerOfTwoFold& fold) {
  const int me = fold.new_rank();
  int first = me, last = me + 1;
  for (int distance = 1; distance < fold.power(); distance *= 2) {
    const int peer = fold.rank_of(me ^ distance);
    const bool partner_below = (me & distance) != 0;
    const int other_first = partner_below ? first - distance : last;
    const int other_last = other_first + distance;
    segments.send_groups(first, last, peer);
    segments.overwrite_groups(other_first, other_last, peer);
    first = std::min(first, other_first);
    last = std::max(last, other_last);
  }
}

void gather_to_first(SegmentedReduction& segments, const PowerOfTwoFold& fold) {
  const int me = fold.new_rank();
  int last = me + 1;
  for (int distance = 1; distance < fold.power(); distance *= 2) {
    if (me & distance) {
      const int peer = fold.rank_of(me - distance);
      segments.send_groups(me, last, peer);
      return;
    }
    const int peer = fold.rank_of(me + distance);
    segments.overwrite_groups(last, last + distance, peer);
    last += distance;
  }
}

void fold_out(SegmentedReduction& segments, const PowerOfTwoFold& fold, size_t first_segment, size_t last_segment) {
  if (fold.takes_partner())
    segments.send_run(first_segment, last_segment, fold.partner());
  else if (fold.folded_out())
    segments.overwrite_run(first_segment, last_segment, fold.partner());
}

size_t halving_group_elements(size_t count, int groups, int group) {
  const size_t base = count / static_cast<size_t>(groups), extra = count % static_cast<size_t>(groups);
  return base + (static_cast<size_t>(group) < extra ? 1 : 0);
}

Plan folded_allreduce_plan(const Call& call, const PlanTuning& tuning, int groups, FoldedExchange exchange) {
  Plan plan;
  if (call.count == 0) return plan;
  const size_t element_bytes = element_size(call.type);
  const size_t segment_bytes = segment_bytes_for(tuning.segment_bytes, element_bytes);
  const BufferKind own = call.in_place ? BufferKind::output : BufferKind::input;
  std::vector<Segment> pieces;
  size_t offset = 0;
  for (int group = 0; group < groups; ++group) {
    const size_t length = halving_group_elements(call.count, groups, group) * element_bytes;
    add_segments(pieces, group, Region{own, offset, length}, Region{BufferKind::output, offset, length},
                 segment_bytes);
    offset += length;
  }

  MessageSlots slots(call.size);
  ReceiveSlots receive_slots(0, std::min(segment_bytes, call.bytes()), tuning.scratch_segments);
  if (call.size > 1) plan.scratch_bytes = receive_slots.bytes();
  SegmentedReduction segments(plan, call, slots, receive_slots, std::move(pieces), groups);

  const PowerOfTwoFold fold(call.rank, call.size);
  fold_in(segments, fold);
  if (!fold.folded_out()) exchange(segments, fold);
  fold_out(segments, fold, 0, segments.size());
  for (size_t s = 0; s < segments.size(); ++s) segments.settle(s);
  return plan;
}

}  // namespace chorus::algorithms
