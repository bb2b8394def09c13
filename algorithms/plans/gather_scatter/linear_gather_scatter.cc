// Linear gather and scatter as Plans. Empty blocks (v variants) send
// nothing: every rank knows every count.
#include "algorithms/plans/gather_scatter/linear_gather_scatter.h"

#include "algorithms/model/block_layout.h"

namespace chorus::algorithms {

namespace {

bool linear_gather_supports(const Call& call) {
  return call.collective == Collective::gather && call.root >= 0 && call.root < call.size;
}

bool linear_scatter_supports(const Call& call) {
  return call.collective == Collective::scatter && call.root >= 0 && call.root < call.size;
}

double linear_gather_scatter_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const double bytes = static_cast<double>(call.total_count() * call.element_bytes());
  const double own = static_cast<double>(call.block_count(call.root) * call.element_bytes());
  return (call.size - 1) * model.alpha_seconds + (bytes - own) * model.beta_seconds_per_byte;
}

Plan linear_gather_plan(const Call& call, const PlanTuning&) {
  Plan plan;
  const std::vector<size_t> offsets = prefix_byte_offsets(block_counts(call), call.element_bytes());
  const size_t own_bytes = offsets[call.rank + 1] - offsets[call.rank];
  const Region own_input{BufferKind::input, 0, own_bytes};
  if (call.rank != call.root) {
    if (own_bytes > 0) plan.send(own_input, call.root, 0);
    return plan;
  }
  if (!call.in_place && own_bytes > 0)
    plan.copy(own_input, block_range(BufferKind::output, offsets, call.rank, call.rank + 1));
  for (int peer = 0; peer < call.size; ++peer) {
    const Region block = block_range(BufferKind::output, offsets, peer, peer + 1);
    if (peer != call.root && block.length > 0) plan.recv(peer, 0, block);
  }
  return plan;
}

Plan linear_scatter_plan(const Call& call, const PlanTuning&) {
  Plan plan;
  const std::vector<size_t> offsets = prefix_byte_offsets(block_counts(call), call.element_bytes());
  const size_t own_bytes = offsets[call.rank + 1] - offsets[call.rank];
  const Region own_output{BufferKind::output, 0, own_bytes};
  if (call.rank != call.root) {
    if (own_bytes > 0) plan.recv(call.root, 0, own_output);
    return plan;
  }
  // In place root's output is its block inside the input: nothing to copy.
  if (!call.in_place && own_bytes > 0)
    plan.copy(block_range(BufferKind::input, offsets, call.rank, call.rank + 1), own_output);
  // Start with the rank after the root so ranks are served in ring order
  // from the root, as the binomial tree's numbering does.
  for (int step = 1; step < call.size; ++step) {
    const int peer = wrap_rank(static_cast<long long>(call.root) + step, call.size);
    const Region block = block_range(BufferKind::input, offsets, peer, peer + 1);
    if (block.length > 0) plan.send(block, peer, 0);
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions linear_gather{linear_gather_supports, linear_gather_scatter_cost, linear_gather_plan};
constexpr AlgorithmFunctions linear_scatter{linear_scatter_supports, linear_gather_scatter_cost, linear_scatter_plan};

}  // namespace chorus::algorithms
