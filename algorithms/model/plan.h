// A Plan is what one rank does for one collective call: a small DAG of
// send/recv/reduce/copy steps over three buffers (the caller's input and
// output, and a scratch area the executor provides). Algorithms build Plans as
// pure functions of the Call; the Executor runs them on sockets and the
// simulator runs them in memory, so both see exactly the same steps.
//
// Rules a Plan builder follows (the simulator checks them):
// - a step only waits for steps added before it (so plan order is a
//   topological order);
// - the sends to one peer are added in the order that peer's Plan adds the
//   matching recvs. The executor posts each (peer, direction) queue in plan
//   order, and a stream transport delivers one peer's messages in order, so a
//   different order could leave a receiver waiting behind a frame it has no
//   receive for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <optional>
#include <vector>

#include "algorithms/model/cost_model.h"

namespace chorus::algorithms {

enum class BufferKind : uint8_t { input, output, scratch };
std::string_view to_string(BufferKind buffer);

// A byte range of one of the three buffers.
struct Region {
  BufferKind buffer = BufferKind::output;
  size_t offset = 0;
  size_t length = 0;
};

enum class StepKind : uint8_t { send, recv, reduce, copy };

using StepId = uint32_t;
// Accepted (and ignored) in dependency lists, so builders can write
// {maybe_previous_step} without branching.
inline constexpr StepId no_step = std::numeric_limits<StepId>::max();

struct Step {
  StepKind kind = StepKind::copy;
  int peer = -1;      // send, recv
  uint32_t slot = 0;  // send, recv: low 32 bits of the wire tag
  Region from{};      // send: bytes sent; reduce: operand; copy: source
  Region to{};        // recv: where bytes land; reduce: accumulator; copy: destination
  uint32_t first_dependency = 0;  // into Plan::dependencies()
  uint32_t dependency_count = 0;

  bool is_communication() const { return kind == StepKind::send || kind == StepKind::recv; }
  // Bytes this step moves or reads.
  size_t bytes() const { return kind == StepKind::recv ? to.length : from.length; }
};

// Knobs that change the shape of a Plan but not its result. Every rank must
// use the same values (they decide segment boundaries and message counts).
struct PlanTuning {
  PlanTuning() = default;
  PlanTuning(size_t segment_bytes_, size_t scratch_segments_)
      : segment_bytes(segment_bytes_), scratch_segments(scratch_segments_) {}

  // Large buffers are cut into segments of about this many bytes so that
  // sending one segment overlaps with reducing the previous one.
  size_t segment_bytes = 512 * 1024;
  // Receive buffers a reduce-scatter keeps in flight; scratch is this many
  // segments no matter how large the user's buffer is.
  size_t scratch_segments = 4;
  // The cost model the Plan is built for. Plans made of phases (the
  // hierarchical ones) choose and tune each phase's flat algorithm with it,
  // at the level of the links that phase crosses; unset: fixed defaults.
  std::optional<CostModel> cost_model;
};

class Plan {
 public:
  using Dependencies = std::initializer_list<StepId>;

  StepId send(Region from, int peer, uint32_t slot, Dependencies after = {});
  StepId recv(int peer, uint32_t slot, Region to, Dependencies after = {});
  // to = to op from, element-wise (op and type come from the Call).
  StepId reduce(Region from, Region to, Dependencies after = {});
  StepId copy(Region from, Region to, Dependencies after = {});
  // Any step, with dependencies gathered at run time (composed Plans).
  // The step's own dependency fields are ignored.
  StepId add(Step step, std::span<const StepId> after);

  const std::vector<Step>& steps() const { return steps_; }
  const Step& step(StepId id) const { return steps_[id]; }
  size_t size() const { return steps_.size(); }
  std::span<const StepId> dependencies(const Step& step) const {
    return {dependencies_.data() + step.first_dependency, step.dependency_count};
  }

  size_t scratch_bytes = 0;
  // Bytes only ever move away from one rank (a tree or a chain from the
  // root): no rank waits, directly or through others, for a rank that waits
  // for it. A receiver that sleeps until its bytes arrive then delays no
  // one's next round, and back to back the root runs ahead of it
  // (executor.cc, poll_for_change).
  bool one_way = false;

 private:
  std::vector<Step> steps_;
  std::vector<StepId> dependencies_;
};

// "output[4096, +4096)"
std::string describe_region(const Region& region);
// "recv of slot 3 from rank 1 (4096 bytes)", "reduce scratch[0, +64) into output[64, +64)"
std::string describe_step(const Step& step);

}  // namespace chorus::algorithms
