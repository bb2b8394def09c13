// Every way chorus can run a call is a Candidate, and one selection
// (selection.h) chooses among them: each Plan on the Executor, the board's
// one shot and pieces, the mapped device allreduce, host staging of device
// memory, the in-place reduce-scatter copy, and the backends' libraries
// (NCCL). A candidate says whether it serves a call on a Communicator and
// what the call would cost with it; `auto` takes the cheapest, and a name
// given by the caller, CHORUS_ALGO or chorus-bench --algo forces any of
// them. (UCC's scored components and NCCL's one tuning table are the
// models: the board against messages is a cost, not a branch.)
//
// Two roles:
// - a candidate that runs the call itself (a Plan, the board, mapped, NCCL);
// - a wrapper, which changes the call and has another candidate run the
//   changed one: staging moves a device call to host copies, the in-place
//   copy runs a reduce-scatter out of place into a block and copies it
//   into place. A wrapper's cost is its own part plus the cheapest inner
//   candidate's, and a name that no candidate serving the call has is
//   looked for inside the wrappers that serve it: `ring` on a small device
//   call runs staged, as ring on the host copies.
//
// Whatever runs, run.h does the bookkeeping once for every candidate: the
// position the liveness probes read, the announcement a board waiter
// needs, the counters, the log line and the trace. Waiting, stall warnings
// and timeouts are the Executor's (waiting.h), the board's included.
//
// Every member must choose alike: serves and cost_seconds read only the
// call, the Communicator's agreed settings and models, and what its
// members agreed when they set up (the board's measured model included).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/model/call.h"
#include "base/deadline.h"

namespace chorus::algorithms {

class Communicator;
struct Algorithm;
struct Candidate;
struct Choice;
struct StepTiming;

// What a run moved, for the Communicator's counters: bytes sent to peers
// and received from them (on a board, read out of this member's slot and
// out of theirs).
struct Moved {
  uint64_t sent = 0;
  uint64_t received = 0;
};

// One run of a chosen candidate.
struct CandidateRun {
  const Communicator& communicator;
  const Call& call;
  const void* input;
  void* output;
  uint32_t sequence;
  Deadline deadline;
  const Choice& choice;  // the candidate's own: a Plan's prepared plan, a wrapper's inner choice
  // With CHORUS_TRACE_STEPS: each step's times (a Plan fills them).
  std::vector<StepTiming>* step_timings = nullptr;
  // When the run started, where the bookkeeping read the clock already.
  std::optional<Clock::time_point> started;
};

// A wrapper's way to have its inner choice run the changed call.
class InnerRun {
 public:
  using Function = void (*)(void* context, const Call& inner_call, const void* input, void* output);
  InnerRun(Function function, void* context) : function_(function), context_(context) {}
  void operator()(const Call& inner_call, const void* input, void* output) const {
    function_(context_, inner_call, input, output);
  }

 private:
  Function function_;
  void* context_;
};

enum class CandidateRole : uint8_t { runs, wraps };

struct Candidate {
  std::string_view name;
  // The collective it serves; none: a wrapper of any collective it serves.
  std::optional<Collective> collective;
  CandidateRole role = CandidateRole::runs;
  // A Plan's table entry (registry.h); null for the other candidates.
  const Algorithm* plan = nullptr;
  // Whether it can run the call here, alike on every member.
  bool (*serves)(const Candidate& self, const Communicator& communicator, const Call& call) = nullptr;
  // The predicted time; infinite: never under `auto`, only by name. A
  // wrapper's own part: the inner choice's cost is added.
  double (*cost_seconds)(const Candidate& self, const Communicator& communicator, const Call& call) = nullptr;
  // runs: the whole call. Throws as any collective (the Mesh aborted first).
  Moved (*run)(const Candidate& self, const CandidateRun& run) = nullptr;
  // wraps: the call its inner candidate runs, and the run around it.
  Call (*inner_call)(const Call& call) = nullptr;
  void (*wrap)(const CandidateRun& run, const InnerRun& inner) = nullptr;
  // Why it cannot serve the call, for the error when it is named (null: the
  // selection's own words).
  std::string (*why_not)(const Candidate& self, const Communicator& communicator, const Call& call) = nullptr;
  // Set up on a Communicator's first call, whatever that call is: every
  // member reaches it alike (the board's shared region).
  void (*first_call)(const Communicator& communicator, uint32_t sequence, Deadline deadline) = nullptr;
  // Queues its work on the caller's stream itself and returns with the
  // result in place (NCCL): the API runs it at issue, neither queued
  // behind the async worker nor ordered against the stream by chorus.
  bool runs_at_issue = false;
  // Takes part in the board's protocol itself: run.h announces every
  // other candidate's call on the board, so a member waiting there learns
  // at once that a peer runs this call on messages.
  bool on_board = false;
};

// What selection chose for a call shape, cached per Communicator.
struct PreparedPlan;
struct Choice {
  const Candidate* candidate = nullptr;
  double cost_seconds = 0;  // predicted, inner choices included
  std::shared_ptr<const PreparedPlan> prepared;  // a Plan's
  std::shared_ptr<const Choice> inner;           // a wrapper's
  // The candidate that finally runs the call (through the wrappers).
  const Choice& innermost() const { return inner ? inner->innermost() : *this; }
};

// Every candidate: the Plans (registry.h), the shared-memory collectives
// (board, mapped), the wrappers, and those the layers above added.
std::span<const Candidate* const> all_candidates();
// The runs-candidate or wrapper of that name that can serve `collective`; null: none.
const Candidate* find_candidate(Collective collective, std::string_view name);
// "ring, ..., board, staged": every name valid for a collective, for error messages and --algo all.
std::string candidate_names(Collective collective);
// Whether `name` is a candidate that runs at issue (Candidate::runs_at_issue),
// without walking the registry: the API asks on every call.
bool names_candidate_run_at_issue(Collective collective, std::string_view name);
// For the layers above (backends/): candidates that live there (NCCL).
// Called once, before the first Context is connected; the span must outlive the process.
void add_candidates(std::span<const Candidate> candidates);

}  // namespace chorus::algorithms
