// A Plan assembled from phases that do not know each other: a hierarchical
// allreduce is a reduce-scatter among one host's ranks, then flat allreduces
// among the ranks holding the same slice on every host, then an allgather
// within the host. Each phase is written (or built by a flat algorithm) on
// its own; the composer finds the dependencies between them from the memory
// the steps touch, so nobody wires segment k of phase 2 to segment k of
// phase 1 by hand.
//
// Every step added here depends, besides its own dependencies, on every
// earlier step it conflicts with: the last writer of any byte it reads or
// writes (read after write, write after write) and the readers since then of
// any byte it writes (write after read: a buffer is not overwritten while a
// send still reads it). These are exactly the orderings the bytes require,
// at byte granularity, so a phase's first segment starts as soon as the
// previous phase finished those bytes and the phases pipeline.
//
// What the composer does not decide is plan order, which fixes the order of
// messages on each pair: phases must add one peer's messages in the order
// that peer adds the matching ones (plan.h), as any Plan builder must.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "algorithms/model/plan.h"

namespace chorus::algorithms {

// Where a sub-plan (built for a smaller Call) runs inside the composed one.
struct Embedding {
  // The sub-plan's rank i is rank members[i] here.
  std::span<const int> members;
  // Where the sub-call's input and output begin in this Plan's buffers.
  BufferKind input = BufferKind::input;
  size_t input_offset = 0;
  BufferKind output = BufferKind::output;
  size_t output_offset = 0;
  // The sub-call is in place: its input regions mean its output.
  bool in_place = true;
  // The sub-plan's slots are shifted into [slot_base, slot_limit).
  uint32_t slot_base = 0;
  uint32_t slot_limit = UINT32_MAX;
};

class ComposedPlan {
 public:
  // `in_place`: the composed call's input and output are one buffer, so a
  // conflict on one is a conflict on the other.
  explicit ComposedPlan(bool in_place) : in_place_(in_place) {}

  StepId send(Region from, int peer, uint32_t slot);
  StepId recv(int peer, uint32_t slot, Region to);
  StepId reduce(Region from, Region to);
  StepId copy(Region from, Region to);

  // Scratch of its own for a phase: returns its offset.
  size_t reserve_scratch(size_t bytes);
  // Appends `sub` as this rank runs it; its scratch gets a fresh area.
  void append(const Plan& sub, const Embedding& where);

  Plan take() &&;

 private:
  // What has touched a run of bytes since it was last written.
  struct Span {
    size_t end = 0;
    StepId writer = no_step;
    std::vector<StepId> readers;
  };
  using Spans = std::map<size_t, Span>;  // start -> span; disjoint

  Spans& spans_of(BufferKind buffer);
  // Splits spans so that `at` starts one (creating an untouched span over a gap).
  Spans::iterator split_at(Spans& spans, size_t at);
  void collect_conflicts(const Region& region, bool writes, std::vector<StepId>& conflicts);
  void record(const Region& region, bool writes, StepId step);
  StepId add(const Step& step, std::vector<StepId>& after);
  StepId add_new(StepKind kind, int peer, uint32_t slot, Region from, Region to);

  bool in_place_;
  Plan plan_;
  Spans input_, output_, scratch_;
  std::vector<StepId> dependencies_;  // reused per step
};

}  // namespace chorus::algorithms
