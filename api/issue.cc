// Numbering a public collective and running it inline or queued.
#include "api/issue.h"

#include <chrono>
#include <memory>
#include <string>

#include "algorithms/run.h"
#include "api/collective_checks.h"
#include "api/context_state.h"
#include "api/device_memory.h"
#include "api/work_queue.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::detail {

using algorithms::Call;

namespace {
// From when the call first waits (base/deadline.h): microseconds after
// issue for a call that waits, and no read of the clock for one that never does.
Deadline deadline_for(const Context& context, const CollectiveOptions& options) {
  return Deadline::after_first_use(operation_timeout(context, options));
}

using RepeatedCall = ContextState::RepeatedCall;

bool same_shape(const Call& call, const CallShape& shape) {
  return call.collective == shape.collective && call.count == shape.count && call.type == shape.type &&
         call.op == shape.op && call.root == shape.root && call.in_place == shape.in_place;
}

CallShape shape_of(const Call& call) {
  return {call.collective, call.count, call.type, call.op, call.root, call.in_place};
}

// std::string's == calls memcmp; an algorithm's name is a few letters.
bool same_name(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// What a call must be for its record to stand for it: blocking, of fixed
// counts, on host memory without a stream, with no steps around its run.
bool repeatable(const Call& call, const CollectiveOptions& options, bool async, const RunSteps& steps) {
  return !async && !call.variable() && call.group_digest == 0 && options.memory.on_host() && !options.cuda_stream &&
         !steps.before && !steps.after;
}

// The record of a blocking call of this shape, where one may run it now:
// no async call queued or running (which the call would have to wait for
// first), and no trace log (whose line about the issue it would skip).
RepeatedCall* repeated_call(ContextState& state, const CallShape& shape, const CollectiveOptions& options) {
  if (!options.memory.on_host() || options.cuda_stream) return nullptr;
  for (RepeatedCall& record : state.repeated_calls) {
    if (!record.choice || !same_shape(record.call, shape) || !same_name(record.algorithm, options.algorithm)) continue;
    if (!state.queue_idle() || log_enabled(LogLevel::trace)) return nullptr;
    return &record;
  }
  return nullptr;
}

// What issue() does for a blocking call, with the Call and choice held.
Work run_repeated(Context& context, ContextState& state, RepeatedCall& record, const void* input, void* output,
                  const CollectiveOptions& options) {
  context.throw_if_failed();
  const uint32_t sequence = state.next_sequence();
  state.chain(record.call, sequence, /*compares=*/true);
  algorithms::run_collective(state.communicator, record.call, input, output, record.algorithm, sequence,
                             deadline_for(context, options), /*caller_waits=*/true, &record.choice);
  return Work();
}

// A new shape's record, once its call ran: in an empty one, else in turn.
// (A shape already held ran the long way because async calls were queued
// or the trace log was on: its record stays.)
void remember(ContextState& state, Call call, const std::string& algorithm, algorithms::HeldChoice choice) {
  RepeatedCall* record = nullptr;
  for (RepeatedCall& candidate : state.repeated_calls) {
    if (candidate.choice && same_shape(candidate.call, shape_of(call)) && same_name(candidate.algorithm, algorithm))
      return;
    if (!candidate.choice && !record) record = &candidate;
  }
  if (!record) {
    record = &state.repeated_calls[state.next_repeated_call];
    state.next_repeated_call = (state.next_repeated_call + 1) % ContextState::kRepeatedCalls;
  }
  *record = RepeatedCall{std::move(call), algorithm, std::move(choice)};
}

Work issue_new(Context& context, Call call, const void* input, void* output, const CollectiveOptions& options,
               bool async, RunSteps steps);
}  // namespace

Work issue(Context& context, Call call, const void* input, void* output, const CollectiveOptions& options,
           bool async, RunSteps steps) {
  if (repeatable(call, options, async, steps)) {
    ContextState& state = state_of(context);
    if (RepeatedCall* record = repeated_call(state, shape_of(call), options))
      return run_repeated(context, state, *record, input, output, options);
  }
  return issue_new(context, std::move(call), input, output, options, async, std::move(steps));
}

Work issue(Context& context, const CallShape& shape, const void* input, void* output,
           const CollectiveOptions& options, bool async) {
  if (!async) {
    ContextState& state = state_of(context);
    if (RepeatedCall* record = repeated_call(state, shape, options))
      return run_repeated(context, state, *record, input, output, options);
  }
  return issue_new(context,
                   make_call(context, shape.collective, shape.count, shape.type, shape.op, shape.root, shape.in_place),
                   input, output, options, async, {});
}

namespace {

// Runs inline after every earlier async collective, or queues behind them.
// The sequence number is taken here, at issue time, so the order of issue is
// the order on the wire whichever thread ends up running the call.
Work issue_new(Context& context, Call call, const void* input, void* output, const CollectiveOptions& options,
               bool async, RunSteps steps) {
  context.throw_if_failed();
  const bool repeats = repeatable(call, options, async, steps);
  ContextState& state = state_of(context);
  const algorithms::Communicator& communicator = state.communicator;
  call.memory = options.memory;
  call.stream = options.cuda_stream;
  call.topology = communicator.shared_topology();
  uint32_t sequence = state.next_sequence();
  CHORUS_LOG(trace, context.rank(), "issued ", algorithms::to_string(call.collective), " #", sequence, ": ",
             call.variable() ? cat("variable counts, ", call.total_count()) : cat(call.count), " ",
             to_string(call.type), async ? " (async)" : "");
  // A candidate that queues on the caller's stream itself and returns with
  // the result in place (NCCL, backends/registry.h) runs now, async or not,
  // after the calls queued before it, and orders itself against the stream.
  const bool backend = algorithms::runs_at_issue(call.collective, options.algorithm);
  state.chain(call, sequence, /*compares=*/!backend);
  if (backend && (steps.before || steps.after))
    throw InvalidArgument(cat("rank ", context.rank(), ": this ", algorithms::to_string(call.collective),
                              " (a grouped call) runs on chorus's own algorithms, not the backend '",
                              options.algorithm, "'"));
  // Device memory: buffers checked, and the call ordered after the caller's
  // stream (now, at issue) and the stream after the call.
  std::shared_ptr<StreamOrder> stream_order =
      prepare_device_call(context, algorithms::to_string(call.collective), options,
                          {{"input", input}, {"output", output}},
                          async && !backend && options.cuda_stream_waits_for_async);
  if (backend) stream_order.reset();
  if (!async || backend) {
    // The caller waits for the whole call: the queue of earlier async calls
    // (timed only when there is one) and the run (timed by the run itself).
    if (!state.queue_idle()) {
      const auto drain_started = std::chrono::steady_clock::now();
      state.work_queue().drain();
      communicator.telemetry().count_waiting(std::chrono::steady_clock::now() - drain_started);
    }
    const Deadline deadline = deadline_for(context, options);
    if (stream_order)
      wait_for_inputs(*stream_order, deadline, context.rank(), algorithms::to_string(call.collective));
    if (steps.before) steps.before();
    algorithms::HeldChoice choice;
    algorithms::run_collective(communicator, call, input, output, options.algorithm, sequence, deadline,
                               /*caller_waits=*/true, repeats ? &choice : nullptr);
    if (steps.after) steps.after();
    if (repeats && !backend && choice) remember(state, std::move(call), options.algorithm, std::move(choice));
    return Work();
  }
  // The deadline starts when the collective starts running, not when queued.
  auto timeout = operation_timeout(context, options);
  auto work = state.work_queue().submit([&communicator, call = std::move(call), input, output,
                                         algorithm = options.algorithm, sequence, timeout, stream_order,
                                         steps = std::move(steps)] {
    // The caller's stream goes on when the call ends, failed or not (the
    // error is Work::wait's to report).
    struct ReleaseStream {
      StreamOrder* order;
      ~ReleaseStream() {
        if (order) order->finished();
      }
    } release{stream_order.get()};
    const Deadline deadline = Deadline::after(timeout);
    if (stream_order)
      wait_for_inputs(*stream_order, deadline, communicator.rank(), algorithms::to_string(call.collective));
    if (steps.before) steps.before();
    algorithms::run_collective(communicator, call, input, output, algorithm, sequence, deadline);
    if (steps.after) steps.after();
  });
  // Read by the caller's Work::wait only, never by the worker.
  work->telemetry = communicator.shared_telemetry();
  return Work(std::move(work));
}

}  // namespace

}  // namespace chorus::detail
