// Per-segment dependency tracking for the reduction Plans.
#include "algorithms/reduction_segments.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {
uint32_t take_slot(std::vector<uint32_t>& counters, const Call& call, int peer) {
  uint32_t& counter = counters[static_cast<size_t>(peer)];
  if (counter == std::numeric_limits<uint32_t>::max())
    throw InvalidArgument(cat("rank ", call.rank, ": ", to_string(call.collective), " of ", call.total_count(),
                              " elements needs more than 2^32 messages to rank ", peer, "; use larger segments"));
  return counter++;
}
}  // namespace

uint32_t MessageSlots::next_send(const Call& call, int peer) { return take_slot(sent_, call, peer); }
uint32_t MessageSlots::next_recv(const Call& call, int peer) { return take_slot(received_, call, peer); }

StepId join_steps(Plan& plan, const std::vector<StepId>& steps) {
  StepId joined = no_step;
  const Region nothing{BufferKind::scratch, 0, 0};
  size_t i = 0;
  if (steps.size() == 1) return steps[0];
  while (i < steps.size()) {
    StepId a = steps[i++];
    StepId b = i < steps.size() ? steps[i++] : no_step;
    StepId c = i < steps.size() ? steps[i++] : no_step;
    joined = plan.copy(nothing, nothing, {joined, a, b, c});
  }
  return joined;
}

ReceiveSlots::ReceiveSlots(size_t scratch_offset, size_t slot_bytes, size_t slots)
    : scratch_offset_(scratch_offset), slot_bytes_(slot_bytes), released_by_(std::max<size_t>(1, slots), no_step) {}

ReceiveSlots::Lease ReceiveSlots::acquire(size_t length) {
  if (length > slot_bytes_) throw std::logic_error("segment larger than its receive slot");
  const size_t index = next_++ % released_by_.size();
  return Lease{Region{BufferKind::scratch, scratch_offset_ + index * slot_bytes_, length}, released_by_[index], index};
}

size_t segment_bytes_for(size_t requested_segment_bytes, size_t element_bytes) {
  return std::max<size_t>(1, requested_segment_bytes / element_bytes) * element_bytes;
}

size_t piece_bytes_for(const PlanTuning& tuning, size_t element_bytes) {
  return segment_bytes_for(tuning.segment_bytes, element_bytes) * std::max<size_t>(1, tuning.scratch_segments) * 2;
}

void add_segments(std::vector<Segment>& segments, int group, Region own, Region accumulator, size_t segment_bytes) {
  for (size_t first = 0; first < own.length; first += segment_bytes) {
    const size_t length = std::min(segment_bytes, own.length - first);
    segments.push_back(Segment{Region{own.buffer, own.offset + first, length},
                               Region{accumulator.buffer, accumulator.offset + first, length}, group});
  }
}

SegmentedReduction::SegmentedReduction(Plan& plan, const Call& call, MessageSlots& slots,
                                       ReceiveSlots& receive_slots, std::vector<Segment> segments, int groups,
                                       StepId accumulator_free)
    : plan_(plan),
      call_(call),
      slots_(slots),
      receive_slots_(receive_slots),
      segments_(std::move(segments)),
      states_(segments_.size()),
      accumulator_free_(accumulator_free) {
  group_begin_.assign(static_cast<size_t>(groups) + 1, 0);
  for (const Segment& segment : segments_) ++group_begin_[static_cast<size_t>(segment.group) + 1];
  for (size_t g = 0; g < static_cast<size_t>(groups); ++g) group_begin_[g + 1] += group_begin_[g];
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& segment = segments_[s];
    if (s > 0 && segment.group < segments_[s - 1].group) throw std::logic_error("segments out of group order");
    // In place the own data already is the accumulator.
    states_[s].in_accumulator =
        segment.own.buffer == segment.accumulator.buffer && segment.own.offset == segment.accumulator.offset;
  }
}

StepId SegmentedReduction::readers_done(State& state) {
  StepId done = join_steps(plan_, state.readers);
  state.readers.clear();
  return done;
}

void SegmentedReduction::send(size_t segment, int peer) {
  State& state = states_[segment];
  const Segment& piece = segments_[segment];
  const uint32_t slot = slots_.next_send(call_, peer);
  if (!state.in_accumulator) {
    plan_.send(piece.own, peer, slot);
    return;
  }
  state.readers.push_back(plan_.send(piece.accumulator, peer, slot, {state.last_writer}));
}

void SegmentedReduction::accumulate(size_t segment, int peer) {
  State& state = states_[segment];
  const Segment& piece = segments_[segment];
  const StepId first_write = state.written ? no_step : accumulator_free_;
  const uint32_t slot = slots_.next_recv(call_, peer);
  if (!state.in_accumulator) {
    // The peer's value lands straight in the accumulator and our own data
    // is reduced into it: no copy, no receive slot (every op commutes).
    StepId received = plan_.recv(peer, slot, piece.accumulator, {first_write});
    state.last_writer = plan_.reduce(piece.own, piece.accumulator, {received});
  } else {
    ReceiveSlots::Lease lease = receive_slots_.acquire(piece.accumulator.length);
    StepId received = plan_.recv(peer, slot, lease.region, {lease.free_after});
    StepId readers = readers_done(state);
    state.last_writer =
        plan_.reduce(lease.region, piece.accumulator, {received, state.last_writer, readers, first_write});
    receive_slots_.release(lease, state.last_writer);
  }
  state.in_accumulator = state.written = true;
}

void SegmentedReduction::overwrite(size_t segment, int peer) {
  State& state = states_[segment];
  const Segment& piece = segments_[segment];
  const StepId first_write = state.written ? no_step : accumulator_free_;
  const uint32_t slot = slots_.next_recv(call_, peer);
  StepId readers = readers_done(state);
  state.last_writer = plan_.recv(peer, slot, piece.accumulator, {state.last_writer, readers, first_write});
  state.in_accumulator = state.written = true;
}

void SegmentedReduction::settle(size_t segment) {
  State& state = states_[segment];
  if (state.in_accumulator) return;
  const Segment& piece = segments_[segment];
  state.last_writer = plan_.copy(piece.own, piece.accumulator, {state.written ? no_step : accumulator_free_});
  state.in_accumulator = state.written = true;
}

StepId SegmentedReduction::finished() {
  std::vector<StepId> last;
  for (State& state : states_) {
    if (state.last_writer != no_step) last.push_back(state.last_writer);
    last.insert(last.end(), state.readers.begin(), state.readers.end());
  }
  return join_steps(plan_, last);
}

}  // namespace chorus::algorithms
