// Composing Plans: conflict tracking over byte spans, and sub-plan embedding.
#include "algorithms/composition/composed_plan.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

ComposedPlan::Spans& ComposedPlan::spans_of(BufferKind buffer) {
  switch (buffer) {
    case BufferKind::input: return in_place_ ? output_ : input_;
    case BufferKind::output: return output_;
    case BufferKind::scratch: return scratch_;
  }
  return output_;
}

ComposedPlan::Spans::iterator ComposedPlan::split_at(Spans& spans, size_t at) {
  auto after = spans.upper_bound(at);
  if (after == spans.begin()) return after;
  auto containing = std::prev(after);
  if (containing->first == at) return containing;
  if (containing->second.end <= at) return after;  // `at` lies in a gap
  Span tail = containing->second;
  containing->second.end = at;
  return spans.emplace_hint(after, at, std::move(tail));
}

void ComposedPlan::collect_conflicts(const Region& region, bool writes, std::vector<StepId>& conflicts) {
  if (region.length == 0) return;
  Spans& spans = spans_of(region.buffer);
  const size_t begin = region.offset, end = region.offset + region.length;
  auto it = spans.upper_bound(begin);
  if (it != spans.begin() && std::prev(it)->second.end > begin) --it;
  for (; it != spans.end() && it->first < end; ++it) {
    conflicts.push_back(it->second.writer);
    if (writes) conflicts.insert(conflicts.end(), it->second.readers.begin(), it->second.readers.end());
  }
}

void ComposedPlan::record(const Region& region, bool writes, StepId step) {
  if (region.length == 0) return;
  Spans& spans = spans_of(region.buffer);
  const size_t begin = region.offset, end = region.offset + region.length;
  split_at(spans, begin);
  split_at(spans, end);
  // Cover gaps in [begin, end) with untouched spans, then mark every span.
  size_t covered = begin;
  auto it = spans.lower_bound(begin);
  while (covered < end) {
    if (it == spans.end() || it->first > covered) {
      const size_t gap_end = it == spans.end() ? end : std::min(end, it->first);
      it = spans.emplace_hint(it, covered, Span{gap_end, no_step, {}});
    }
    Span& span = it->second;
    if (writes) {
      span.writer = step;
      span.readers.clear();
    } else {
      span.readers.push_back(step);
    }
    covered = span.end;
    ++it;
  }
}

StepId ComposedPlan::add(const Step& step, std::vector<StepId>& after) {
  const bool reads_from = step.kind != StepKind::recv;
  const bool writes_to = step.kind != StepKind::send;
  if (reads_from) collect_conflicts(step.from, false, after);
  if (writes_to) collect_conflicts(step.to, true, after);
  std::sort(after.begin(), after.end());
  after.erase(std::unique(after.begin(), after.end()), after.end());
  if (!after.empty() && after.back() == no_step) after.pop_back();
  const StepId id = plan_.add(step, after);
  if (reads_from) record(step.from, false, id);
  if (writes_to) record(step.to, true, id);
  return id;
}

StepId ComposedPlan::add_new(StepKind kind, int peer, uint32_t slot, Region from, Region to) {
  dependencies_.clear();
  return add(Step{.kind = kind, .peer = peer, .slot = slot, .from = from, .to = to}, dependencies_);
}

StepId ComposedPlan::send(Region from, int peer, uint32_t slot) {
  return add_new(StepKind::send, peer, slot, from, Region{});
}

StepId ComposedPlan::recv(int peer, uint32_t slot, Region to) {
  return add_new(StepKind::recv, peer, slot, Region{}, to);
}

StepId ComposedPlan::reduce(Region from, Region to) {
  if (from.length != to.length) throw std::logic_error("composed plan: reduce between regions of different lengths");
  return add_new(StepKind::reduce, -1, 0, from, to);
}

StepId ComposedPlan::copy(Region from, Region to) {
  if (from.length != to.length) throw std::logic_error("composed plan: copy between regions of different lengths");
  return add_new(StepKind::copy, -1, 0, from, to);
}

size_t ComposedPlan::reserve_scratch(size_t bytes) {
  const size_t offset = plan_.scratch_bytes;
  plan_.scratch_bytes += bytes;
  return offset;
}

void ComposedPlan::append(const Plan& sub, const Embedding& where) {
  const size_t scratch_base = reserve_scratch(sub.scratch_bytes);
  auto place = [&](Region region) {
    if (region.buffer == BufferKind::input && where.in_place) region.buffer = BufferKind::output;
    switch (region.buffer) {
      case BufferKind::input:
        region.buffer = where.input;
        region.offset += where.input_offset;
        break;
      case BufferKind::output:
        region.buffer = where.output;
        region.offset += where.output_offset;
        break;
      case BufferKind::scratch: region.offset += scratch_base; break;
    }
    return region;
  };
  std::vector<StepId> placed(sub.size());
  for (StepId id = 0; id < sub.size(); ++id) {
    Step step = sub.step(id);
    if (step.is_communication()) {
      if (step.peer < 0 || static_cast<size_t>(step.peer) >= where.members.size())
        throw Error(cat("composed plan: a sub-plan step names rank ", step.peer, " of ", where.members.size()));
      step.peer = where.members[static_cast<size_t>(step.peer)];
      if (step.slot >= where.slot_limit - where.slot_base)
        throw InvalidArgument(cat("a phase of this plan needs more than ", where.slot_limit - where.slot_base,
                                  " messages per pair; use larger segments"));
      step.slot += where.slot_base;
      step.to = place(step.to);
      step.from = place(step.from);
    } else {
      step.from = place(step.from);
      step.to = place(step.to);
    }
    dependencies_.clear();
    for (StepId dependency : sub.dependencies(sub.step(id))) dependencies_.push_back(placed[dependency]);
    placed[id] = add(step, dependencies_);
  }
}

Plan ComposedPlan::take() && { return std::move(plan_); }

}  // namespace chorus::algorithms
