// Per-segment dependency tracking for the reduction Plans.
#include "algorithms/model/reduction_segments.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {
bool follows(const Region& before, const Region& after) {
  return before.buffer == after.buffer && before.offset + before.length == after.offset;
}

Region joined(const Region& first, const Region& last) {
  return Region{first.buffer, first.offset, last.offset + last.length - first.offset};
}

Region part_of(const Region& region, size_t offset, size_t length) {
  return Region{region.buffer, region.offset + offset, length};
}

// Calls action(begin, end) for the maximal stretches of [first, last) whose
// neighbours `join`.
template <class Joins, class Action>
void for_stretches(size_t first, size_t last, Joins&& join, Action&& action) {
  size_t begin = first;
  for (size_t s = first + 1; s <= last; ++s)
    if (s == last || !join(s - 1, s)) {
      action(begin, s);
      begin = s;
    }
}

// A step after many segments' steps, each listed once.
StepId add_step(Plan& plan, const Step& step, std::vector<StepId>& after) {
  std::sort(after.begin(), after.end());
  after.erase(std::unique(after.begin(), after.end()), after.end());
  return plan.add(step, after);
}

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

Region SegmentedReduction::current(size_t segment) const {
  return states_[segment].in_accumulator ? segments_[segment].accumulator : segments_[segment].own;
}

template <class Message>
void SegmentedReduction::for_messages(size_t first, size_t last, Message&& message) const {
  const size_t limit = packing_ ? receive_slots_.slot_bytes() : 0;
  size_t begin = first;
  while (begin < last) {
    size_t end = begin + 1, bytes = segments_[begin].own.length;
    while (end < last && bytes + segments_[end].own.length <= limit) bytes += segments_[end++].own.length;
    message(begin, end, bytes);
    begin = end;
  }
}

void SegmentedReduction::add_write_dependencies(size_t segment, std::vector<StepId>& after) {
  State& state = states_[segment];
  after.push_back(state.last_writer);
  after.insert(after.end(), state.readers.begin(), state.readers.end());
  state.readers.clear();
  if (!state.written) after.push_back(accumulator_free_);
}

void SegmentedReduction::send_run(size_t first, size_t last, int peer) {
  for_messages(first, last, [&](size_t begin, size_t end, size_t) {
    if (end == begin + 1) send(begin, peer);
    else send_message(begin, end, peer);
  });
}

void SegmentedReduction::accumulate_run(size_t first, size_t last, int peer) {
  for_messages(first, last, [&](size_t begin, size_t end, size_t bytes) {
    if (end == begin + 1) accumulate(begin, peer);
    else accumulate_message(begin, end, bytes, peer);
  });
}

void SegmentedReduction::overwrite_run(size_t first, size_t last, int peer) {
  for_messages(first, last, [&](size_t begin, size_t end, size_t bytes) {
    if (end == begin + 1) overwrite(begin, peer);
    else overwrite_message(begin, end, bytes, peer);
  });
}

void SegmentedReduction::send_message(size_t first, size_t last, int peer) {
  const uint32_t slot = slots_.next_send(call_, peer);
  bool contiguous = true;
  for (size_t s = first + 1; s < last && contiguous; ++s) contiguous = follows(current(s - 1), current(s));
  if (contiguous) {
    std::vector<StepId> after;
    for (size_t s = first; s < last; ++s)
      if (states_[s].in_accumulator) after.push_back(states_[s].last_writer);
    const Step step{.kind = StepKind::send, .peer = peer, .slot = slot, .from = joined(current(first), current(last - 1))};
    const StepId sent = add_step(plan_, step, after);
    for (size_t s = first; s < last; ++s)
      if (states_[s].in_accumulator) states_[s].readers.push_back(sent);
    return;
  }
  // Staging the values in scratch would let a send wait for a receive slot,
  // which can close a cycle of waits between ranks; builders whose values
  // are not contiguous on the sender keep one message per segment instead.
  throw std::logic_error(cat("rank ", call_.rank, ": segments ", first, "..", last - 1,
                             " packed into one message lie apart on the sender"));
}

void SegmentedReduction::accumulate_message(size_t first, size_t last, size_t bytes, int peer) {
  const uint32_t slot = slots_.next_recv(call_, peer);
  auto accumulator = [&](size_t s) { return segments_[s].accumulator; };
  auto own = [&](size_t s) { return segments_[s].own; };
  bool fresh = !states_[first].in_accumulator, accumulators_contiguous = true;
  for (size_t s = first + 1; s < last; ++s) {
    fresh = fresh && !states_[s].in_accumulator;
    accumulators_contiguous = accumulators_contiguous && follows(accumulator(s - 1), accumulator(s));
  }
  if (fresh && accumulators_contiguous) {
    // As accumulate(): straight into the accumulators, then the own data reduced in.
    std::vector<StepId> after;
    for (size_t s = first; s < last; ++s) add_write_dependencies(s, after);
    const StepId received = add_step(
        plan_, Step{.kind = StepKind::recv, .peer = peer, .slot = slot, .to = joined(accumulator(first),
                                                                                    accumulator(last - 1))},
        after);
    for_stretches(
        first, last, [&](size_t a, size_t b) { return follows(own(a), own(b)); },
        [&](size_t begin, size_t end) {
          const StepId reduced =
              plan_.reduce(joined(own(begin), own(end - 1)), joined(accumulator(begin), accumulator(end - 1)),
                           {received});
          for (size_t s = begin; s < end; ++s) states_[s].last_writer = reduced;
        });
  } else {
    const ReceiveSlots::Lease lease = receive_slots_.acquire(bytes);
    const StepId received = plan_.recv(peer, slot, lease.region, {lease.free_after});
    std::vector<StepId> lease_readers;
    size_t offset = 0;
    auto joins = [&](size_t a, size_t b) {
      return states_[a].in_accumulator == states_[b].in_accumulator && follows(accumulator(a), accumulator(b)) &&
             (states_[a].in_accumulator || follows(own(a), own(b)));
    };
    for_stretches(first, last, joins, [&](size_t begin, size_t end) {
      const Region into = joined(accumulator(begin), accumulator(end - 1));
      const Region arrived = part_of(lease.region, offset, into.length);
      offset += into.length;
      std::vector<StepId> after{received};
      for (size_t s = begin; s < end; ++s) add_write_dependencies(s, after);
      StepId written;
      if (states_[begin].in_accumulator) {
        written = add_step(plan_, Step{.kind = StepKind::reduce, .from = arrived, .to = into}, after);
        lease_readers.push_back(written);
      } else {
        const StepId copied = add_step(plan_, Step{.kind = StepKind::copy, .from = arrived, .to = into}, after);
        lease_readers.push_back(copied);
        written = plan_.reduce(joined(own(begin), own(end - 1)), into, {copied});
      }
      for (size_t s = begin; s < end; ++s) states_[s].last_writer = written;
    });
    receive_slots_.release(lease, join_steps(plan_, lease_readers));
  }
  for (size_t s = first; s < last; ++s) states_[s].in_accumulator = states_[s].written = true;
}

void SegmentedReduction::overwrite_message(size_t first, size_t last, size_t bytes, int peer) {
  const uint32_t slot = slots_.next_recv(call_, peer);
  auto accumulator = [&](size_t s) { return segments_[s].accumulator; };
  bool contiguous = true;
  for (size_t s = first + 1; s < last && contiguous; ++s) contiguous = follows(accumulator(s - 1), accumulator(s));
  if (contiguous) {
    std::vector<StepId> after;
    for (size_t s = first; s < last; ++s) add_write_dependencies(s, after);
    const Step step{.kind = StepKind::recv, .peer = peer, .slot = slot,
                    .to = joined(accumulator(first), accumulator(last - 1))};
    const StepId received = add_step(plan_, step, after);
    for (size_t s = first; s < last; ++s) states_[s].last_writer = received;
  } else {
    const ReceiveSlots::Lease lease = receive_slots_.acquire(bytes);
    const StepId received = plan_.recv(peer, slot, lease.region, {lease.free_after});
    std::vector<StepId> copies;
    size_t offset = 0;
    for_stretches(
        first, last, [&](size_t a, size_t b) { return follows(accumulator(a), accumulator(b)); },
        [&](size_t begin, size_t end) {
          const Region into = joined(accumulator(begin), accumulator(end - 1));
          std::vector<StepId> after{received};
          for (size_t s = begin; s < end; ++s) add_write_dependencies(s, after);
          const StepId copied = add_step(
              plan_, Step{.kind = StepKind::copy, .from = part_of(lease.region, offset, into.length), .to = into},
              after);
          offset += into.length;
          copies.push_back(copied);
          for (size_t s = begin; s < end; ++s) states_[s].last_writer = copied;
        });
    receive_slots_.release(lease, join_steps(plan_, copies));
  }
  for (size_t s = first; s < last; ++s) states_[s].in_accumulator = states_[s].written = true;
}

}  // namespace chorus::algorithms
