// The bookkeeping shared by the tree and recursive reduction Plans
// (recursive doubling, halving-doubling, recursive-halving reduce-scatter,
// binomial and reduce-scatter-gather reduce).
//
// Those algorithms move pieces of a buffer between ranks in several rounds,
// and a piece is reduced on one rank, sent on, overwritten... To let every
// piece travel as soon as its own previous round is done (instead of waiting
// for whole rounds) the buffer is cut into segments and each segment tracks:
// where its current value lives (the rank's own data until something is
// reduced into it, then its accumulator), the step that last wrote it and the
// sends still reading it. The builders then only say "send segment s to p",
// "reduce p's segment s into mine", "take p's segment s as the result".
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/call.h"
#include "algorithms/plan.h"

namespace chorus::algorithms {

// Slot (tag) numbers per peer and direction: the k-th message from a to b
// carries slot k on both sides, whatever else either rank sends.
class MessageSlots {
 public:
  explicit MessageSlots(int size) : sent_(static_cast<size_t>(size), 0), received_(static_cast<size_t>(size), 0) {}
  uint32_t next_send(const Call& call, int peer);
  uint32_t next_recv(const Call& call, int peer);

 private:
  std::vector<uint32_t> sent_, received_;
};

// A step that finishes once all of `steps` have (no_step if empty). Built from
// empty copy steps, since a Plan step lists its dependencies up front.
StepId join_steps(Plan& plan, const std::vector<StepId>& steps);

// A few scratch areas that received segments land in before being reduced,
// reused round robin: bounds scratch however large the buffer.
class ReceiveSlots {
 public:
  ReceiveSlots(size_t scratch_offset, size_t slot_bytes, size_t slots);
  size_t bytes() const { return slot_bytes_ * released_by_.size(); }

  struct Lease {
    Region region;
    StepId free_after;  // the last step that used the area
    size_t index;
  };
  Lease acquire(size_t length);
  void release(const Lease& lease, StepId step) { released_by_[lease.index] = step; }

 private:
  size_t scratch_offset_, slot_bytes_;
  std::vector<StepId> released_by_;
  size_t next_ = 0;
};

struct Segment {
  Region own;          // this rank's contribution (input, or output in place)
  Region accumulator;  // where its reduced value is built (output or scratch)
  int group = 0;       // segments come in groups, in group order
};

// Cuts a run of `own` (and the same-length `accumulator`) into segments of
// about `segment_bytes` (whole elements), appending them to `segments`.
void add_segments(std::vector<Segment>& segments, int group, Region own, Region accumulator, size_t segment_bytes);

// Segment length in bytes: whole elements, about the requested size.
size_t segment_bytes_for(size_t requested_segment_bytes, size_t element_bytes);
// Plans whose accumulators live in scratch work through the buffer a piece
// of this many bytes (a whole number of segments) at a time, so scratch stays
// bounded; two pieces are in flight so one piece's last rounds overlap the
// next one's first.
size_t piece_bytes_for(const PlanTuning& tuning, size_t element_bytes);

class SegmentedReduction {
 public:
  // `accumulator_free`: the first write into any accumulator waits for it
  // (scratch accumulators reused from an earlier piece of the buffer).
  SegmentedReduction(Plan& plan, const Call& call, MessageSlots& slots, ReceiveSlots& receive_slots,
                     std::vector<Segment> segments, int groups, StepId accumulator_free = no_step);

  size_t size() const { return segments_.size(); }
  // Segment indices of groups [first, last).
  size_t group_begin(int group) const { return group_begin_[static_cast<size_t>(group)]; }

  // Sends the segment's current value.
  void send(size_t segment, int peer);
  // Receives the peer's partial value of the segment and reduces it in.
  void accumulate(size_t segment, int peer);
  // Receives the final value of the segment into the accumulator.
  void overwrite(size_t segment, int peer);
  // Makes sure the accumulator holds the value (copies the own data of a
  // segment nothing was reduced into).
  void settle(size_t segment);

  template <class Action>
  void for_groups(int first, int last, Action&& action) {
    for (size_t s = group_begin(first); s < group_begin(last); ++s) action(s);
  }

  // A step after which no step of this object touches any accumulator.
  StepId finished();

 private:
  struct State {
    bool in_accumulator = false;
    bool written = false;
    StepId last_writer = no_step;
    std::vector<StepId> readers;  // sends of the accumulator since last_writer
  };
  StepId readers_done(State& state);

  Plan& plan_;
  const Call& call_;
  MessageSlots& slots_;
  ReceiveSlots& receive_slots_;
  std::vector<Segment> segments_;
  std::vector<State> states_;
  std::vector<size_t> group_begin_;
  StepId accumulator_free_;
};

}  // namespace chorus::algorithms
