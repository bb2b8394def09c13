// Dependency counting and per-queue send limits for running a Plan.
#include "algorithms/model/schedule.h"

#include <cassert>
#include <map>
#include <utility>

namespace chorus::algorithms {

namespace {
constexpr uint32_t no_queue = UINT32_MAX;
}

PlanGraph::PlanGraph(const Plan& plan) {
  const size_t count = plan.size();
  dependents_begin_.assign(count + 1, 0);
  for (const Step& step : plan.steps())
    for (StepId dependency : plan.dependencies(step)) ++dependents_begin_[dependency + 1];
  for (size_t i = 0; i < count; ++i) dependents_begin_[i + 1] += dependents_begin_[i];
  dependents_.resize(dependents_begin_[count]);
  std::vector<uint32_t> fill(dependents_begin_.begin(), dependents_begin_.end() - 1);
  for (StepId id = 0; id < count; ++id)
    for (StepId dependency : plan.dependencies(plan.step(id))) dependents_[fill[dependency]++] = id;

  queue_of_.assign(count, no_queue);
  communication_index_.assign(count, no_queue);
  std::map<std::pair<int, bool>, uint32_t> queue_by_peer;
  for (StepId id = 0; id < count; ++id) {
    const Step& step = plan.step(id);
    if (!step.is_communication()) continue;
    communication_index_[id] = static_cast<uint32_t>(communication_steps_++);
    bool sends = step.kind == StepKind::send;
    auto [it, inserted] = queue_by_peer.try_emplace({step.peer, sends}, static_cast<uint32_t>(queues_.size()));
    if (inserted) queues_.push_back(Queue{step.peer, sends, {}});
    queue_of_[id] = it->second;
    queues_[it->second].steps.push_back(id);
  }
}

void StepScheduler::reset(const Plan& plan, const PlanGraph& graph, SendLimit send_limit) {
  plan_ = &plan;
  graph_ = &graph;
  send_limit_ = send_limit;
  const size_t count = plan.size();
  missing_.resize(count);
  unqueued_.resize(count);
  finished_flags_.assign(count, false);
  queued_flags_.assign(count, false);
  ready_local_.clear();
  ready_local_head_ = 0;
  finished_ = 0;
  candidates_.clear();
  ready_local_.reserve(count - graph.communication_steps());
  for (StepId id = 0; id < count; ++id) {
    const Step& step = plan.step(id);
    missing_[id] = step.dependency_count;
    unqueued_[id] = step.dependency_count;
    if (missing_[id] == 0 && !step.is_communication()) ready_local_.push_back(id);
  }
  queue_states_.assign(graph.queues().size(), QueueState{});
  candidates_.reserve(queue_states_.size());
  for (uint32_t queue = 0; queue < queue_states_.size(); ++queue) mark_candidate(queue);
}

void StepScheduler::mark_candidate(uint32_t queue) {
  if (queue_states_[queue].candidate) return;
  queue_states_[queue].candidate = true;
  candidates_.push_back(queue);
}

bool StepScheduler::can_post(uint32_t queue) const {
  const QueueState& state = queue_states_[queue];
  const std::vector<StepId>& steps = graph_->queues()[queue].steps;
  if (state.head >= steps.size()) return false;
  StepId head = steps[state.head];
  if (missing_[head] != 0) return false;
  if (state.in_flight_steps == 0) return true;
  if (state.in_flight_steps >= send_limit_.max_steps) return false;
  return state.in_flight_bytes + plan_->step(head).bytes() <= send_limit_.max_bytes;
}

std::optional<StepId> StepScheduler::next_local() {
  if (ready_local_head_ == ready_local_.size()) return std::nullopt;
  return ready_local_[ready_local_head_++];
}

std::optional<StepId> StepScheduler::next_post() {
  while (!candidates_.empty()) {
    uint32_t queue = candidates_.back();
    if (can_post(queue)) {
      QueueState& state = queue_states_[queue];
      StepId id = graph_->queues()[queue].steps[state.head++];
      ++state.in_flight_steps;
      state.in_flight_bytes += plan_->step(id).bytes();
      return id;
    }
    candidates_.pop_back();
    queue_states_[queue].candidate = false;
  }
  return std::nullopt;
}

void StepScheduler::finish(StepId id) {
  finished_flags_[id] = true;
  ++finished_;
  const Step& step = plan_->step(id);
  if (step.is_communication()) {
    uint32_t queue = graph_->queue_of(id);
    QueueState& state = queue_states_[queue];
    --state.in_flight_steps;
    state.in_flight_bytes -= step.bytes();
    mark_candidate(queue);
  }
  const bool was_queued = queued_flags_[id];
  for (StepId dependent : graph_->dependents(id)) {
    assert(missing_[dependent] > 0 && (was_queued || unqueued_[dependent] > 0));
    --missing_[dependent];
    const Step& next = plan_->step(dependent);
    if (next.is_communication()) {
      if (missing_[dependent] == 0) mark_candidate(graph_->queue_of(dependent));
    } else if (!was_queued && --unqueued_[dependent] == 0) {
      ready_local_.push_back(dependent);
    }
  }
}

void StepScheduler::queued(StepId id) {
  assert(!queued_flags_[id] && !finished_flags_[id]);
  queued_flags_[id] = true;
  for (StepId dependent : graph_->dependents(id)) {
    if (plan_->step(dependent).is_communication()) continue;
    assert(unqueued_[dependent] > 0);
    if (--unqueued_[dependent] == 0) ready_local_.push_back(dependent);
  }
}

}  // namespace chorus::algorithms
