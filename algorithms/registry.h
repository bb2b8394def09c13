// Every algorithm the library knows, by collective and name. Adding an
// algorithm means one entry here; selection, CHORUS_ALGO and the tests find
// it through this table.
//
// Two kinds: Plans, which chorus's executor runs and the cost model prices,
// and backends, libraries that run the call themselves (NCCL,
// algorithms/nccl/). A backend queues its work on the caller's CUDA stream
// and returns with the result in place, so the API neither orders it
// against that stream nor defers it to the async worker. The cost model
// knows nothing of a backend: it runs only when a call names it, never
// under "auto" or CHORUS_ALGO, and the lists of valid names below are the
// Plans'.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "algorithms/call.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"
#include "base/deadline.h"

namespace chorus::algorithms {

class Communicator;

struct Algorithm {
  Collective collective;
  std::string_view name;
  bool (*supports)(const Call& call);
  double (*cost_seconds)(const Call& call, const CostModel& model);
  Plan (*build)(const Call& call, const PlanTuning& tuning);
  // The tuning `build` gets for a real call, derived from the same model the
  // cost used, so selection predicts the Plan that runs. Null: PlanTuning{}.
  PlanTuning (*tune)(const Call& call, const CostModel& model) = nullptr;
};

// algorithm.tune(call, model), or the default tuning when it has none.
PlanTuning plan_tuning(const Algorithm& algorithm, const Call& call, const CostModel& model);

std::span<const Algorithm> all_algorithms();
// Null when no algorithm of that name exists for the collective.
const Algorithm* find_algorithm(Collective collective, std::string_view name);
// "ring, ..." : the names valid for a collective, for error messages.
std::string algorithm_names(Collective collective);

struct Backend {
  Collective collective;
  std::string_view name;
  // Runs the call on the Communicator, throwing InvalidArgument before any
  // data moves for a call it cannot serve. `sequence` is the call's number
  // on the Communicator, for whatever the backend must agree on with the
  // other members (NCCL: the groups of its bootstrap).
  void (*run)(const Communicator& communicator, const Call& call, const void* input, void* output,
              uint32_t sequence, Deadline deadline);
};

std::span<const Backend> all_backends();
// Null when no backend of that name exists for the collective.
const Backend* find_backend(Collective collective, std::string_view name);

}  // namespace chorus::algorithms
