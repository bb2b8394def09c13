// Pairwise alltoall as a Plan.
//
// Round k starts when round k-1's send and receive are both done: that keeps
// one message per direction on every link at a time instead of all P-1 at
// once (which makes P-1 senders fight over one receiver's link). For
// alltoallv every round exchanges a message even when a block is empty:
// counts here are this rank's own and not part of the call signature, so a
// length the peer did not expect must arrive and be reported as a mismatch,
// not be waited for.
#include "algorithms/plans/alltoall/pairwise_alltoall.h"

#include "algorithms/model/block_layout.h"

namespace chorus::algorithms {

AlltoallLayout::AlltoallLayout(const Call& call) {
  const size_t element = call.element_bytes();
  const std::vector<size_t> fixed(static_cast<size_t>(call.size), call.count);
  send_offsets = prefix_byte_offsets(call.send_counts.empty() ? fixed : call.send_counts, element);
  receive_offsets = prefix_byte_offsets(call.recv_counts.empty() ? fixed : call.recv_counts, element);
}

namespace {

bool pairwise_alltoall_supports(const Call& call) { return call.collective == Collective::alltoall && !call.in_place; }

double pairwise_alltoall_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  size_t largest = call.count;
  for (size_t count : call.send_counts) largest = std::max(largest, count);
  const double block = static_cast<double>(largest * call.element_bytes());
  return (call.size - 1) * (model.alpha_seconds + block * model.beta_seconds_per_byte);
}

Plan pairwise_alltoall_plan(const Call& call, const PlanTuning&) {
  Plan plan;
  const int size = call.size, rank = call.rank;
  if (call.in_place)
    throw InvalidArgument(cat("rank ", rank, ": alltoall needs separate input and output buffers"));
  if (!call.variable() && call.count == 0) return plan;
  const AlltoallLayout layout(call);
  const Region own_send = block_range(BufferKind::input, layout.send_offsets, rank, rank + 1);
  const Region own_receive = block_range(BufferKind::output, layout.receive_offsets, rank, rank + 1);
  if (own_send.length != own_receive.length)
    throw InvalidArgument(cat("rank ", rank, ": alltoallv sends ", own_send.length, " bytes to itself but expects ",
                              own_receive.length));
  if (own_send.length > 0) plan.copy(own_send, own_receive);

  StepId previous_send = no_step, previous_receive = no_step;
  for (int distance = 1; distance < size; ++distance) {
    const int to = wrap_rank(rank + distance, size), from = wrap_rank(rank - distance, size);
    const StepId sent = plan.send(block_range(BufferKind::input, layout.send_offsets, to, to + 1), to, 0,
                                  {previous_send, previous_receive});
    previous_receive = plan.recv(from, 0, block_range(BufferKind::output, layout.receive_offsets, from, from + 1),
                                 {previous_send, previous_receive});
    previous_send = sent;
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions pairwise_alltoall{pairwise_alltoall_supports, pairwise_alltoall_cost,
                                               pairwise_alltoall_plan};

}  // namespace chorus::algorithms
