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

#include "algorithms/shared_memory/board.h"
#include "algorithms/execution/candidate.h"
#include "algorithms/execution/deferred_root_checks.h"
#include "algorithms/execution/local_steps.h"
#include "algorithms/model/call_rules.h"
#include "algorithms/execution/plan_cache.h"
#include "algorithms/selection/selection.h"
#include "algorithms/execution/staging.h"
#include "algorithms/execution/telemetry.h"
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
  const std::string_view name = to_string(call.collective);
  if (!call.counts.empty())
    if (std::string problem = counts_problem(rank, call.size, name, "counts", call.counts, call.type); !problem.empty())
      return problem;
  if (call.collective == Collective::alltoall && call.send_counts.size() != call.recv_counts.size())
    return cat("rank ", rank, ": alltoallv has ", call.send_counts.size(), " send counts but ",
               call.recv_counts.size(), " receive counts");
  if (!call.send_counts.empty())
    if (std::string problem = counts_problem(rank, call.size, name, "send counts", call.send_counts, call.type);
        !problem.empty())
      return problem;
  if (is_rooted(call.collective))
    if (std::string problem = root_problem(rank, call.size, name, call.root); !problem.empty()) return problem;
  if (is_reduction(call.collective))
    if (std::string problem = reduction_problem(rank, name, call.type, call.op); !problem.empty()) return problem;
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

// A clock read costs about 20 ns: calls predicted faster than this (on the
// board) are timed one in kTimedEvery for the statistics, weighed as the
// calls they stand for; every call is timed while tracing or logging.
constexpr double kSampledBelowSeconds = 5e-6;
constexpr uint64_t kTimedEvery = 64;

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
// CHORUS_TRACE_STEPS, one per step of a Plan, overlapping as they ran.
void trace_run(const Communicator& communicator, const Call& call, uint32_t sequence, const Choice* choice,
               double start_us, double end_us, const std::vector<StepTiming>& steps, const std::exception_ptr& error) {
  const Telemetry& telemetry = communicator.telemetry();
  TraceArgs args = describe_for_trace(call, sequence);
  args.add("bytes", static_cast<uint64_t>(std::max(input_bytes(call), output_bytes(call))));
  const PreparedPlan* prepared = choice ? choice->prepared.get() : nullptr;
  if (prepared) {
    std::call_once(prepared->trace_fields_once, [&] {
      TraceArgs fields;
      fields.add("algorithm", choice->candidate->name);
      fields.add("transport", transports_of(communicator, prepared->peers));
      fields.add("peers", prepared->peers);
      fields.add("sent", prepared->bytes_sent).add("received", prepared->bytes_received);
      prepared->trace_fields = fields.fields();
    });
    args.add_fields(prepared->trace_fields);
  } else {
    args.add("algorithm", choice ? choice->candidate->name : std::string_view("none"));
    if (choice && choice->candidate->on_board) args.add("transport", "board");
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

// What every call does whatever runs it: the set-up of the Communicator's
// first call, the choice, the position the liveness probes read, the
// board's announcement, the counters, the log line and the trace. A
// failure anywhere (an unknown name too) is the call's: counted, traced,
// logged and thrown.
class Bookkeeping {
 public:
  Bookkeeping(const Communicator& communicator, const Call& call, uint32_t sequence, bool caller_waits,
              HeldChoice* held)
      : communicator_(communicator), call_(call), sequence_(sequence), caller_waits_(caller_waits), held_(held) {}

  // Runs `choice` (through its wrappers) on the buffers.
  void run(const std::string& requested, const void* input, void* output, Deadline deadline) {
    Telemetry& telemetry = communicator_.telemetry();
    const bool tracing = telemetry.tracing();
    const bool logged = log_enabled(LogLevel::debug);
    communicator_.note_started(sequence_);
    std::exception_ptr error;
    const double started_us = tracing ? trace_clock_us() : 0;
    Clock::time_point started{};
    try {
      // Root checks earlier calls left (deferred_root_checks.h): a
      // disagreement they hold fails this call, on every rank.
      DeferredRootChecks* earlier = communicator_.deferred_root_checks();
      if (earlier && earlier->empty()) earlier = nullptr;
      if (earlier) earlier->settle(communicator_, deadline, DeferredRootChecks::Wait::make_room);
      if (!communicator_.set_up()) {
        started = Clock::now();
        timed_ = true;
        for (const Candidate* candidate : all_candidates())
          if (candidate->first_call) candidate->first_call(communicator_, sequence_, deadline);
        communicator_.mark_set_up();
      }
      if (held_ && *held_) {
        choice_ = held_->get();
      } else {
        owned_ = communicator_.plan_cache().find(call_, requested);
        if (!owned_) {
          owned_ = choose(communicator_, call_, requested);
          communicator_.plan_cache().add(call_, requested, owned_);
        }
        choice_ = owned_.get();
        if (held_) *held_ = owned_;
      }
      const Choice& runs = choice_->innermost();
      const bool sampled = runs.cost_seconds < kSampledBelowSeconds && !tracing && !logged;
      if (!timed_) {
        const uint64_t number = sampled ? communicator_.count_sampled_call() : 0;
        timed_ = !sampled || number % kTimedEvery == 0;
        weight_ = sampled && number != 0 ? kTimedEvery : 1;
        if (timed_) started = Clock::now();
      }
      run_choice(*choice_, call_, input, output, deadline, timed_ ? std::optional(started) : std::nullopt);
      // And what arrived while this call ran (a board call polls no pair).
      if (earlier && !earlier->empty()) earlier->settle(communicator_, deadline, DeferredRootChecks::Wait::none);
    } catch (...) {
      error = std::current_exception();
    }
    communicator_.note_finished(sequence_);
    const auto call_took = timed_ ? std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started)
                                  : std::chrono::nanoseconds(0);
    const auto took = call_took * static_cast<int64_t>(weight_);
    telemetry.count_collective(!error, error ? 0 : moved_.sent, error ? 0 : moved_.received, took);
    // (A locked add: skipped for the calls the sampling left untimed.)
    if (caller_waits_ && took.count() != 0) telemetry.count_waiting(took);
    const Choice* runs = choice_ ? &choice_->innermost() : nullptr;
    CHORUS_LOG(debug, communicator_.rank(), to_string(call_.collective), " #", sequence_, " (",
               call_.variable() ? cat("variable counts, ", call_.total_count()) : cat(call_.count), " ",
               to_string(call_.type), "): ", runs ? runs->candidate->name : std::string_view("not run"), ", ",
               std::chrono::duration_cast<std::chrono::microseconds>(call_took).count(), " us",
               error ? ", failed" : "");
    if (tracing) {
      thread_local std::vector<StepTiming> no_steps;
      trace_run(communicator_, call_, sequence_, runs, started_us, trace_clock_us(),
                telemetry.tracing_steps() ? step_timings() : no_steps, error);
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  // Per thread, as the executor's run state: a traced loop allocates once.
  static std::vector<StepTiming>& step_timings() {
    thread_local std::vector<StepTiming> timings;
    return timings;
  }

  struct Inner {
    Bookkeeping* bookkeeping;
    const Choice* choice;
    Deadline deadline;
    std::optional<Clock::time_point> started;
  };

  void run_choice(const Choice& choice, const Call& call, const void* input, void* output, Deadline deadline,
                  std::optional<Clock::time_point> started) {
    const Candidate& candidate = *choice.candidate;
    CandidateRun run{communicator_, call, input, output, sequence_, deadline, choice, nullptr, std::nullopt};
    if (candidate.role == CandidateRole::wraps) {
      Inner inner{this, choice.inner.get(), deadline, started};
      candidate.wrap(run, InnerRun(
                              [](void* context, const Call& inner_call, const void* in, void* out) {
                                const Inner& inner = *static_cast<const Inner*>(context);
                                inner.bookkeeping->run_choice(*inner.choice, inner_call, in, out, inner.deadline,
                                                              inner.started);
                              },
                              &inner));
      return;
    }
    // A member waiting on the board for this number learns that it differs.
    if (!candidate.on_board) announce_on_board(communicator_, call, sequence_);
    run.started = started;
    run.step_timings = communicator_.telemetry().tracing_steps() ? &step_timings() : nullptr;
    moved_ = candidate.run(candidate, run);
  }

  const Communicator& communicator_;
  const Call& call_;
  const uint32_t sequence_;
  const bool caller_waits_;
  HeldChoice* const held_;
  // The choice run: the held one (no reference counted per call), else the
  // plan cache's, kept alive by owned_ for the run.
  const Choice* choice_ = nullptr;
  std::shared_ptr<const Choice> owned_;
  bool timed_ = false;
  uint64_t weight_ = 1;
  Moved moved_;
};

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
                    const std::string& algorithm, uint32_t sequence, Deadline deadline, bool caller_waits,
                    HeldChoice* held) {
  assert(call.topology && problem_of(communicator, call, input, output).empty());
  Bookkeeping(communicator, call, sequence, caller_waits, held).run(algorithm, input, output, deadline);
}

bool runs_at_issue(Collective collective, std::string_view algorithm) {
  return algorithm != "auto" && names_candidate_run_at_issue(collective, algorithm);
}

}  // namespace chorus::algorithms
