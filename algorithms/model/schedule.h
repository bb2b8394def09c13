// The order in which a Plan's steps may run, shared by the Executor and the
// simulator so both follow the same rules.
//
// Communication steps are grouped in queues, one per (peer, direction), and
// each queue is posted strictly in plan order. A queue posts its head once the
// head's dependencies are finished and the queue's send limit has room. Because
// every Plan orders one peer's messages identically on both sides, the oldest
// unfinished message of the whole job always has both its send and its recv
// at the head of their queues, so the send limit can never deadlock the job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "algorithms/model/plan.h"

namespace chorus::algorithms {

// Bounds the sends one peer's queue has posted and not yet finished, so a
// huge buffer does not hand the transport thousands of messages at once. A
// queue may always post one step, whatever its size. Receives are not
// bounded: a posted receive is bookkeeping only, while a message that
// arrives before its receive is posted is buffered and copied once more.
// Bounding receives like sends let eager senders run ahead by the limit
// plus the socket buffers, and at 16-64 MiB over tcp that extra copy cost a
// quarter of the bandwidth (benchmarks/README.md, issue 12).
struct SendLimit {
  size_t max_steps = 16;
  size_t max_bytes = 16 * 1024 * 1024;
};

// Static facts about a Plan derived once (and cached with it).
class PlanGraph {
 public:
  struct Queue {
    int peer = -1;
    bool sends = false;
    std::vector<StepId> steps;  // plan order
  };

  explicit PlanGraph(const Plan& plan);

  std::span<const StepId> dependents(StepId id) const {
    return {dependents_.data() + dependents_begin_[id], dependents_begin_[id + 1] - dependents_begin_[id]};
  }
  const std::vector<Queue>& queues() const { return queues_; }
  uint32_t queue_of(StepId id) const { return queue_of_[id]; }
  // Dense numbering of the communication steps (one transport Request each).
  uint32_t communication_index(StepId id) const { return communication_index_[id]; }
  size_t communication_steps() const { return communication_steps_; }

 private:
  std::vector<uint32_t> dependents_begin_;
  std::vector<StepId> dependents_;
  std::vector<Queue> queues_;
  std::vector<uint32_t> queue_of_;
  std::vector<uint32_t> communication_index_;
  size_t communication_steps_ = 0;
};

// The mutable progress of one run of a Plan. reset() starts a new run and
// keeps the storage, so an executor thread that runs one call after another
// allocates nothing once it has seen a Plan of that size.
class StepScheduler {
 public:
  StepScheduler() = default;
  StepScheduler(const Plan& plan, const PlanGraph& graph, SendLimit send_limit) { reset(plan, graph, send_limit); }
  void reset(const Plan& plan, const PlanGraph& graph, SendLimit send_limit);

  // A reduce/copy step whose dependencies are finished (or queued, below),
  // oldest first.
  std::optional<StepId> next_local();
  // A send/recv that may be posted now; counts it as in flight in its queue.
  std::optional<StepId> next_post();
  void finish(StepId id);
  // The executor's stream-ordered path: local step `id` is queued on a
  // stream that runs its work in queue order, so a local step waiting only
  // on it and on steps finished or queued the same way can be queued behind
  // it at once, without waiting for its fence. Sends and receives still
  // wait for finish(id): the wire sees only bytes a fence has shown written.
  void queued(StepId id);

  bool done() const { return finished_ == plan_->size(); }
  bool is_finished(StepId id) const { return finished_flags_[id]; }
  uint32_t missing_dependencies(StepId id) const { return missing_[id]; }

 private:
  struct QueueState {
    size_t head = 0;  // next step to post
    size_t in_flight_steps = 0;
    size_t in_flight_bytes = 0;
    bool candidate = false;
  };

  bool can_post(uint32_t queue) const;
  void mark_candidate(uint32_t queue);

  const Plan* plan_ = nullptr;
  const PlanGraph* graph_ = nullptr;
  SendLimit send_limit_;
  std::vector<uint32_t> missing_;
  // Per local step, its dependencies neither finished nor queued(); equal
  // to missing_ unless the stream-ordered path queues steps.
  std::vector<uint32_t> unqueued_;
  std::vector<bool> finished_flags_;
  std::vector<bool> queued_flags_;
  std::vector<StepId> ready_local_;
  size_t ready_local_head_ = 0;
  std::vector<QueueState> queue_states_;
  std::vector<uint32_t> candidates_;
  size_t finished_ = 0;
};

}  // namespace chorus::algorithms
