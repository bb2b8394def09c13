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

#include "algorithms/model/call.h"
#include "algorithms/model/plan.h"

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
  size_t slot_bytes() const { return slot_bytes_; }

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

  // The same three for segments [first, last) in as few messages as fit a
  // receive slot. Consecutive segments are packed greedily by length, which
  // every rank computes alike (segment lengths do not depend on the rank), so
  // a round that moves many groups smaller than a segment sends one message,
  // not one per group: at 1,024 ranks, 10 messages per halving instead of 1,023.
  void send_run(size_t first, size_t last, int peer);
  void accumulate_run(size_t first, size_t last, int peer);
  void overwrite_run(size_t first, size_t last, int peer);
  // Packing needs every message's values contiguous on the sender (they are
  // where groups follow each other in every buffer); off, each segment is
  // its own message. Must be the same on every rank.
  void set_packing(bool packing) { packing_ = packing; }
  // Of groups [first, last).
  void send_groups(int first, int last, int peer) { send_run(group_begin(first), group_begin(last), peer); }
  void accumulate_groups(int first, int last, int peer) {
    accumulate_run(group_begin(first), group_begin(last), peer);
  }
  void overwrite_groups(int first, int last, int peer) {
    overwrite_run(group_begin(first), group_begin(last), peer);
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
  // Where the segment's value is now.
  Region current(size_t segment) const;
  // Calls message(first, last, bytes) for each message of the run.
  template <class Message>
  void for_messages(size_t first, size_t last, Message&& message) const;
  // What a write into the segment's accumulator waits for (its last writer,
  // the sends still reading it, and the first-write gate); forgets the readers.
  void add_write_dependencies(size_t segment, std::vector<StepId>& after);
  // One message of several segments (a single segment goes through send(),
  // accumulate() and overwrite()).
  void send_message(size_t first, size_t last, int peer);
  void accumulate_message(size_t first, size_t last, size_t bytes, int peer);
  void overwrite_message(size_t first, size_t last, size_t bytes, int peer);

  Plan& plan_;
  const Call& call_;
  MessageSlots& slots_;
  ReceiveSlots& receive_slots_;
  std::vector<Segment> segments_;
  std::vector<State> states_;
  std::vector<size_t> group_begin_;
  StepId accumulator_free_;
  bool packing_ = true;
};

}  // namespace chorus::algorithms
