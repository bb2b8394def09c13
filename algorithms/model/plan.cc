// Building Plans and describing their steps for error messages.
#include "algorithms/model/plan.h"

#include <stdexcept>

#include "base/log.h"

namespace chorus::algorithms {

std::string_view to_string(BufferKind buffer) {
  switch (buffer) {
    case BufferKind::input: return "input";
    case BufferKind::output: return "output";
    case BufferKind::scratch: return "scratch";
  }
  return "unknown-buffer";
}

StepId Plan::add(Step step, std::span<const StepId> after) {
  if (steps_.size() >= no_step) throw std::length_error("plan has more steps than StepId can number");
  StepId id = static_cast<StepId>(steps_.size());
  step.first_dependency = static_cast<uint32_t>(dependencies_.size());
  step.dependency_count = 0;
  for (StepId dependency : after) {
    if (dependency == no_step) continue;
    // A dependency on a later step would make plan order no longer a
    // topological order, which the per-peer queues of the executor rely on.
    if (dependency >= id) throw std::logic_error(cat("plan step ", id, " depends on later step ", dependency));
    dependencies_.push_back(dependency);
    ++step.dependency_count;
  }
  steps_.push_back(step);
  return id;
}

StepId Plan::send(Region from, int peer, uint32_t slot, Dependencies after) {
  return add(Step{.kind = StepKind::send, .peer = peer, .slot = slot, .from = from}, after);
}

StepId Plan::recv(int peer, uint32_t slot, Region to, Dependencies after) {
  return add(Step{.kind = StepKind::recv, .peer = peer, .slot = slot, .to = to}, after);
}

StepId Plan::reduce(Region from, Region to, Dependencies after) {
  if (from.length != to.length) throw std::logic_error("plan reduce between regions of different lengths");
  return add(Step{.kind = StepKind::reduce, .from = from, .to = to}, after);
}

StepId Plan::copy(Region from, Region to, Dependencies after) {
  if (from.length != to.length) throw std::logic_error("plan copy between regions of different lengths");
  return add(Step{.kind = StepKind::copy, .from = from, .to = to}, after);
}

std::string describe_region(const Region& region) {
  return cat(to_string(region.buffer), "[", region.offset, ", +", region.length, ")");
}

std::string describe_step(const Step& step) {
  switch (step.kind) {
    case StepKind::send:
      return cat("send of slot ", step.slot, " to rank ", step.peer, " (", step.from.length, " bytes from ",
                 describe_region(step.from), ")");
    case StepKind::recv:
      return cat("recv of slot ", step.slot, " from rank ", step.peer, " (", step.to.length, " bytes into ",
                 describe_region(step.to), ")");
    case StepKind::reduce:
      return cat("reduce ", describe_region(step.from), " into ", describe_region(step.to));
    case StepKind::copy:
      return cat("copy ", describe_region(step.from), " to ", describe_region(step.to));
  }
  return "unknown step";
}

}  // namespace chorus::algorithms
