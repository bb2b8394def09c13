// Numbering a public collective and running it inline or queued.
#include "api/issue.h"

#include <chrono>
#include <memory>
#include <string>

#include "algorithms/run.h"
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
}  // namespace

// Runs inline after every earlier async collective, or queues behind them.
// The sequence number is taken here, at issue time, so the order of issue is
// the order on the wire whichever thread ends up running the call.
Work issue(Context& context, Call call, const void* input, void* output, const CollectiveOptions& options,
           bool async, RunSteps steps) {
  context.throw_if_failed();
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
  if (backend && (steps.before || steps.after))
    throw InvalidArgument(cat("rank ", context.rank(), ": this ", algorithms::to_string(call.collective),
                              " (a grouped call) runs on chorus's own algorithms, not the backend '",
                              options.algorithm, "'"));
  // Device memory: buffers checked, and the call ordered after the caller's
  // stream (now, at issue) and the stream after the call.
  std::shared_ptr<StreamOrder> stream_order =
      prepare_device_call(context, algorithms::to_string(call.collective), options,
                          {{"input", input}, {"output", output}}, async && !backend);
  if (backend) stream_order.reset();
  if (!async || backend) {
    // The caller waits for the whole call: the queue of earlier async calls
    // (timed only when there is one) and the run (timed by the run itself).
    if (!state.queue_idle()) {
      const auto drain_started = std::chrono::steady_clock::now();
      state.work_queue().drain();
      communicator.telemetry().count_waiting(std::chrono::steady_clock::now() - drain_started);
    }
    if (stream_order) stream_order->inputs_ready();
    if (steps.before) steps.before();
    algorithms::run_collective(communicator, call, input, output, options.algorithm, sequence,
                               deadline_for(context, options), /*caller_waits=*/true);
    if (steps.after) steps.after();
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
    if (stream_order) stream_order->inputs_ready();
    if (steps.before) steps.before();
    algorithms::run_collective(communicator, call, input, output, algorithm, sequence, Deadline::after(timeout));
    if (steps.after) steps.after();
  });
  // Read by the caller's Work::wait only, never by the worker.
  work->telemetry = communicator.shared_telemetry();
  return Work(std::move(work));
}

}  // namespace chorus::detail
