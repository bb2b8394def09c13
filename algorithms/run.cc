// run_collective: select, build (or reuse) the Plan, execute, finish; and
// checked_call, the checks for callers below the public API.
#include "algorithms/run.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/board.h"
#include "algorithms/executor.h"
#include "algorithms/local_steps.h"
#include "algorithms/mapped_allreduce.h"
#include "memory/registry.h"
#include "algorithms/plan_cache.h"
#include "algorithms/selection.h"
#include "algorithms/staging.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/transport.h"

namespace chorus::algorithms {

namespace {

bool is_rooted(Collective collective) {
  return collective == Collective::broadcast || collective == Collective::reduce || collective == Collective::gather ||
         collective == Collective::scatter;
}

bool is_reduction(Collective collective) {
  return collective == Collective::allreduce || collective == Collective::reduce ||
         collective == Collective::reduce_scatter;
}

// Where an in-place call's two pointers must be. The block collectives keep
// this rank's block inside the big buffer (see input_bytes in call.h).
bool is_in_place_layout(const Call& call, const void* input, const void* output) {
  const auto* in = static_cast<const std::byte*>(input);
  const auto* out = static_cast<const std::byte*>(output);
  const size_t own_block = call.block_offset(call.rank) * call.element_bytes();
  switch (call.collective) {
    case Collective::allgather: return in == out + own_block;
    case Collective::gather: return call.rank != call.root || in == out + own_block;
    case Collective::scatter: return call.rank != call.root || out == in + own_block;
    case Collective::reduce_scatter: return out == in + own_block;
    case Collective::broadcast: return true;  // uses output only
    default: return in == out;
  }
}

std::string describe_in_place_layout(const Call& call) {
  switch (call.collective) {
    case Collective::allgather:
    case Collective::gather: return "input is not this rank's block inside output";
    case Collective::scatter: return "output is not root's block inside input";
    case Collective::reduce_scatter: return "output is not this rank's block inside input";
    default: return "input != output";
  }
}

// What is wrong with the call, or nothing: thrown by checked_call, asserted
// by run_collective.
std::string problem_of(const Communicator& communicator, const Call& call, const void* input,
                       const void* output) {
  const int rank = communicator.rank();
  if (call.rank != rank || call.size != communicator.size())
    return cat("rank ", rank, ": call describes rank ", call.rank, " of ", call.size, " but the context is rank ",
               rank, " of ", communicator.size());
  if (!communicator.accepts(call.memory) && !runs_staged(communicator, call))
    return cat("rank ", rank, ": ", to_string(call.collective), " on ", to_string(call.memory),
               " memory, which a transport of this context cannot move");
  if (call.collective == Collective::barrier) return {};
  if (call.collective == Collective::send || call.collective == Collective::recv)
    return cat("rank ", rank, ": ", to_string(call.collective),
               " is point to point; use chorus::send/recv, not a collective");
  const auto ranks = static_cast<size_t>(call.size);
  if (!call.counts.empty() && call.counts.size() != ranks)
    return cat("rank ", rank, ": ", to_string(call.collective), " has ", call.counts.size(), " counts for ",
               call.size, " ranks");
  if (call.collective == Collective::alltoall && call.send_counts.size() != call.recv_counts.size())
    return cat("rank ", rank, ": alltoallv has ", call.send_counts.size(), " send counts but ",
               call.recv_counts.size(), " receive counts");
  if (!call.send_counts.empty() && call.send_counts.size() != ranks)
    return cat("rank ", rank, ": alltoallv has ", call.send_counts.size(), " counts for ", call.size, " ranks");
  if (is_rooted(call.collective) && (call.root < 0 || call.root >= call.size))
    return cat("rank ", rank, ": ", to_string(call.collective), " root ", call.root, " is not a rank of this ",
               call.size, "-rank context");
  if (is_reduction(call.collective)) {
    try {
      validate_reduction(call.type, call.op);
    } catch (const InvalidArgument& error) {
      return error.what();
    }
  }
  if (output_bytes(call) > 0 && output == nullptr)
    return cat("rank ", rank, ": ", to_string(call.collective), " needs ", output_bytes(call),
               " output bytes but was given a null output");
  if (call.in_place && !is_in_place_layout(call, input, output))
    return cat("rank ", rank, ": ", to_string(call.collective), " marked in place but ",
               describe_in_place_layout(call));
  if (!call.in_place && input_bytes(call) > 0 && input == nullptr)
    return cat("rank ", rank, ": ", to_string(call.collective), " needs ", input_bytes(call),
               " input bytes but was given a null input");
  return {};
}

}  // namespace

namespace {

// "shm", or "shm+tcp" when the peers of a Plan are served by several transports.
std::string transports_of(const Communicator& communicator, const std::vector<int>& peers) {
  std::vector<std::string> names;
  for (int peer : peers) {
    std::string name(communicator.mesh().transport_of(communicator.mesh_rank(peer)));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  }
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : "+") + name;
  return joined.empty() ? "none" : joined;
}

// One span for the collective on the Communicator's track and, with
// CHORUS_TRACE_STEPS, one per step, overlapping as they ran.
void trace_run(const Communicator& communicator, const Call& call, uint32_t sequence, const Algorithm* algorithm,
               const PreparedPlan* prepared, double start_us, double end_us, const std::vector<StepTiming>& steps,
               const std::exception_ptr& error) {
  const Telemetry& telemetry = communicator.telemetry();
  TraceArgs args = describe_for_trace(call, sequence);
  args.add("bytes", static_cast<uint64_t>(std::max(input_bytes(call), output_bytes(call))));
  if (prepared) {
    std::call_once(prepared->trace_fields_once, [&] {
      TraceArgs fields;
      fields.add("algorithm", algorithm ? algorithm->name : std::string_view("none"));
      fields.add("transport", transports_of(communicator, prepared->peers));
      fields.add("peers", prepared->peers);
      fields.add("sent", prepared->bytes_sent).add("received", prepared->bytes_received);
      prepared->trace_fields = fields.fields();
    });
    args.add_fields(prepared->trace_fields);
  } else {
    args.add("algorithm", "none");
  }
  args.add_error(error);
  const std::string_view name = to_string(call.collective);
  telemetry.trace().span(telemetry.track(), name, "collective", start_us, end_us - start_us, args);
  if (!prepared) return;
  for (StepId id = 0; id < steps.size(); ++id) {
    const StepTiming& timing = steps[id];
    if (timing.start_us == 0 || timing.end_us == 0) continue;
    const Step& step = prepared->plan.step(id);
    TraceArgs step_args;
    step_args.add("step", static_cast<uint64_t>(id)).add("bytes", static_cast<uint64_t>(step.bytes()));
    if (step.is_communication()) step_args.add("peer", step.peer).add("slot", static_cast<uint64_t>(step.slot));
    telemetry.trace().overlapping_span(telemetry.track(), describe_step(step), "step",
                                       cat(telemetry.track(), ".", sequence, ".", id), timing.start_us,
                                       timing.end_us - timing.start_us, step_args);
  }
}

void run_plan(const Communicator& communicator, const Call& call, const void* input, void* output,
              const std::string& algorithm, uint32_t sequence, Deadline deadline, bool caller_waits) {
  Telemetry& telemetry = communicator.telemetry();
  communicator.note_started(sequence);
  const Clock::time_point started = Clock::now();
  const double started_us = telemetry.tracing() ? trace_clock_us() : 0;
  // Per thread, as the executor's run state: a traced loop allocates once.
  thread_local std::vector<StepTiming> step_timings;
  std::optional<CachedChoice> choice;
  std::exception_ptr error;
  try {
    choice = communicator.plan_cache().find(call, algorithm);
    if (!choice) {
      const CostModel& model = communicator.cost_model();
      const Algorithm& chosen = select_algorithm(call, algorithm, model, communicator.settings().algorithm_overrides);
      const PlanTuning tuning = plan_tuning(chosen, call, model);
      choice = CachedChoice{&chosen, std::make_shared<const PreparedPlan>(chosen.build(call, tuning))};
      communicator.plan_cache().add(call, algorithm, *choice);
    }
    // Once the call is known to run (its algorithm exists and serves it):
    // a member waiting on the board for this number learns that it differs.
    announce_on_board(communicator, call, sequence);
    ExecuteExtras extras;
    extras.step_timings = telemetry.tracing_steps() ? &step_timings : nullptr;
    extras.started = started;
    execute(communicator, choice->prepared->plan, choice->prepared->graph, call, input, output, sequence, deadline,
            extras);
    finish_collective(call, output, memory_backend(call.memory));
  } catch (...) {
    error = std::current_exception();
  }
  communicator.note_finished(sequence);
  const PreparedPlan* prepared = choice ? choice->prepared.get() : nullptr;
  const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started);
  telemetry.count_collective(!error, prepared && !error ? prepared->bytes_sent : 0,
                             prepared && !error ? prepared->bytes_received : 0, took);
  if (caller_waits) telemetry.count_waiting(took);
  CHORUS_LOG(debug, communicator.rank(), to_string(call.collective), " #", sequence, " (",
             call.variable() ? cat("variable counts, ", call.total_count()) : cat(call.count), " ",
             to_string(call.type), "): ", choice ? choice->algorithm->name : std::string_view("not run"), ", ",
             std::chrono::duration_cast<std::chrono::microseconds>(took).count(), " us", error ? ", failed" : "");
  if (telemetry.tracing()) {
    if (!telemetry.tracing_steps()) step_timings.clear();
    trace_run(communicator, call, sequence, choice ? choice->algorithm : nullptr, prepared, started_us,
              trace_clock_us(), step_timings, error);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

Call checked_call(const Communicator& communicator, Call call, const void* input, const void* output) {
  if (!call.topology) call.topology = communicator.shared_topology();
  if ((call.collective == Collective::allreduce || call.collective == Collective::reduce) && input == output &&
      input != nullptr)
    call.in_place = true;
  if (std::string problem = problem_of(communicator, call, input, output); !problem.empty())
    throw InvalidArgument(problem);
  return call;
}

void run_collective(const Communicator& communicator, const Call& call, const void* input, void* output,
                    const std::string& algorithm, uint32_t sequence, Deadline deadline, bool caller_waits) {
  assert(call.topology && problem_of(communicator, call, input, output).empty());
  // Small calls on host memory of the ranks of one host: flags in memory
  // they all map (first: it is the path whose every instruction counts).
  if (run_on_board(communicator, call, input, output, algorithm, sequence, deadline, caller_waits)) return;
  // Device memory every member maps from every other: the peers' buffers
  // are read in place (algorithms/mapped_allreduce.h).
  if (runs_mapped(communicator, call, algorithm)) {
    communicator.note_started(sequence);
    struct Finished {
      const Communicator& communicator;
      uint32_t sequence;
      ~Finished() { communicator.note_finished(sequence); }
    } finished{communicator, sequence};
    announce_on_board(communicator, call, sequence);
    run_mapped_allreduce(communicator, call, input, output, algorithm, sequence, deadline);
    return;
  }
  // Device memory that a transport of this Communicator cannot move, or a
  // small collective on it, runs on pinned host copies (algorithms/staging.h).
  if (runs_staged(communicator, call)) {
    run_staged(call, input, output, [&](const Call& host_call, const void* host_input, void* host_output) {
      run_collective(communicator, host_call, host_input, host_output, algorithm, sequence, deadline, caller_waits);
    });
    return;
  }
  if (call.collective == Collective::reduce_scatter && call.in_place) {
    // Reduce-scatter Plans read this rank's input block until their last
    // step, so none reduces into it in place: run out of place into a
    // block-sized buffer (1/size of the data) and copy the result into place.
    Call out_of_place = call;
    out_of_place.in_place = false;
    announce_on_board(communicator, call, sequence);
    MemoryBackend& backend = memory_backend(call.memory);
    const size_t bytes = output_bytes(out_of_place);
    std::shared_ptr<std::byte> block = backend.allocate(bytes);
    run_plan(communicator, out_of_place, input, block.get(), algorithm, sequence, deadline, caller_waits);
    backend.copy(static_cast<std::byte*>(output), block.get(), bytes);
    return;
  }
  run_plan(communicator, call, input, output, algorithm, sequence, deadline, caller_waits);
}

}  // namespace chorus::algorithms
