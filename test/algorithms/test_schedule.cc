// StepScheduler's rules (algorithms/model/schedule.h) on hand-made Plans:
// what becomes ready when, and that the stream-ordered path's queued() lets
// a local step queue behind the local steps it waits on, while sends and
// receives still wait for those steps to finish.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "algorithms/model/plan.h"
#include "algorithms/model/schedule.h"

using namespace chorus::algorithms;

namespace {

Region output(size_t offset) { return Region{BufferKind::output, offset, 64}; }
Region scratch(size_t offset) { return Region{BufferKind::scratch, offset, 64}; }

// Every local step ready now, in the scheduler's order.
std::vector<StepId> drain_local(StepScheduler& scheduler) {
  std::vector<StepId> ready;
  while (std::optional<StepId> id = scheduler.next_local()) ready.push_back(*id);
  return ready;
}

std::vector<StepId> drain_posts(StepScheduler& scheduler) {
  std::vector<StepId> posted;
  while (std::optional<StepId> id = scheduler.next_post()) posted.push_back(*id);
  return posted;
}

}  // namespace

TEST_CASE("scheduler: a local step is ready once its dependencies finish, and only once") {
  Plan plan;
  plan.scratch_bytes = 128;
  const StepId copy = plan.copy(output(0), scratch(0));
  const StepId recv = plan.recv(1, 0, scratch(64));
  const StepId reduce = plan.reduce(scratch(64), scratch(0), {copy, recv});
  const StepId send = plan.send(scratch(0), 1, 1, {reduce});
  const PlanGraph graph(plan);
  StepScheduler scheduler(plan, graph, SendLimit{});

  REQUIRE(drain_local(scheduler) == std::vector<StepId>{copy});
  REQUIRE(drain_posts(scheduler) == std::vector<StepId>{recv});
  scheduler.finish(copy);
  REQUIRE(drain_local(scheduler).empty());  // the receive is still out
  scheduler.finish(recv);
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{reduce});
  REQUIRE(drain_posts(scheduler).empty());  // the send waits for the reduction
  scheduler.finish(reduce);
  REQUIRE(drain_posts(scheduler) == std::vector<StepId>{send});
  scheduler.finish(send);
  REQUIRE(scheduler.done());
  REQUIRE(drain_local(scheduler).empty());
}

TEST_CASE("scheduler: queued local steps let the local steps behind them queue, not the messages") {
  // copy -> reduce A -> reduce B -> send, and a receive whose landing waits
  // for reduce A to have read its scratch; reduce C needs reduce B and that
  // receive.
  Plan plan;
  plan.scratch_bytes = 192;
  const StepId copy = plan.copy(output(0), scratch(0));
  const StepId reduce_a = plan.reduce(output(64), scratch(0), {copy});
  const StepId reduce_b = plan.reduce(output(128), scratch(0), {reduce_a});
  const StepId send = plan.send(scratch(0), 1, 0, {reduce_b});
  const StepId recv = plan.recv(1, 0, scratch(64), {reduce_a});
  const StepId reduce_c = plan.reduce(scratch(64), scratch(128), {reduce_b, recv});
  const PlanGraph graph(plan);
  StepScheduler scheduler(plan, graph, SendLimit{});

  REQUIRE(drain_local(scheduler) == std::vector<StepId>{copy});
  REQUIRE(drain_posts(scheduler).empty());
  scheduler.queued(copy);
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{reduce_a});
  scheduler.queued(reduce_a);
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{reduce_b});
  scheduler.queued(reduce_b);
  // Neither message goes before the fences of what it waits on pass, and
  // reduce C still waits for the receive.
  REQUIRE(drain_posts(scheduler).empty());
  REQUIRE(drain_local(scheduler).empty());

  // Fences pass in queue order; finishing a queued step readies no local
  // step a second time.
  scheduler.finish(copy);
  REQUIRE(drain_local(scheduler).empty());
  REQUIRE(drain_posts(scheduler).empty());
  scheduler.finish(reduce_a);
  REQUIRE(drain_posts(scheduler) == std::vector<StepId>{recv});
  REQUIRE(drain_local(scheduler).empty());
  scheduler.finish(recv);
  // reduce B is queued: reduce C may queue behind it.
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{reduce_c});
  scheduler.finish(reduce_b);
  REQUIRE(drain_posts(scheduler) == std::vector<StepId>{send});
  REQUIRE(drain_local(scheduler).empty());
  scheduler.finish(send);
  scheduler.finish(reduce_c);
  REQUIRE(scheduler.done());
}

TEST_CASE("scheduler: without queued() a local step waits for its local dependencies to finish") {
  Plan plan;
  plan.scratch_bytes = 64;
  const StepId copy = plan.copy(output(0), scratch(0));
  const StepId reduce = plan.reduce(output(64), scratch(0), {copy});
  const PlanGraph graph(plan);
  StepScheduler scheduler(plan, graph, SendLimit{});
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{copy});
  REQUIRE(drain_local(scheduler).empty());
  scheduler.finish(copy);
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{reduce});
  scheduler.finish(reduce);
  REQUIRE(scheduler.done());

  // reset() forgets what the last run queued.
  scheduler.reset(plan, graph, SendLimit{});
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{copy});
  scheduler.queued(copy);
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{reduce});
  scheduler.reset(plan, graph, SendLimit{});
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{copy});
  REQUIRE(drain_local(scheduler).empty());
  // A run that does not queue (host memory after device memory on one
  // thread) readies the reduction when the copy finishes.
  scheduler.finish(copy);
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{reduce});
  scheduler.finish(reduce);
  REQUIRE(scheduler.done());
}

TEST_CASE("scheduler: a queued step that finishes does not count twice for a local step also waiting on a receive") {
  // reduce waits on copy (queued, then finished) and on a receive that is
  // still out: it must not be ready until the receive finishes.
  Plan plan;
  plan.scratch_bytes = 128;
  const StepId copy = plan.copy(output(0), scratch(0));
  const StepId recv = plan.recv(1, 0, scratch(64));
  const StepId reduce = plan.reduce(scratch(64), scratch(0), {copy, recv});
  const PlanGraph graph(plan);
  StepScheduler scheduler(plan, graph, SendLimit{});
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{copy});
  REQUIRE(drain_posts(scheduler) == std::vector<StepId>{recv});
  scheduler.queued(copy);
  REQUIRE(drain_local(scheduler).empty());
  scheduler.finish(copy);
  REQUIRE(drain_local(scheduler).empty());  // the receive has not landed
  scheduler.finish(recv);
  REQUIRE(drain_local(scheduler) == std::vector<StepId>{reduce});
  scheduler.finish(reduce);
  REQUIRE(scheduler.done());
}
