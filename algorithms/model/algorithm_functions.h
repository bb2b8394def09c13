// What an algorithm is made of: whether it serves a call, what the call costs
// with it, and the Plan it builds. Each algorithm's file defines one of these
// and its header declares it; the registry (registry.h) lists it under a
// collective and a name.
#pragma once

#include "algorithms/model/call.h"
#include "algorithms/model/cost_model.h"
#include "algorithms/model/plan.h"

namespace chorus::algorithms {

struct AlgorithmFunctions {
  bool (*supports)(const Call& call);
  double (*cost_seconds)(const Call& call, const CostModel& model);
  Plan (*build)(const Call& call, const PlanTuning& tuning);
  // The tuning `build` gets for a real call, derived from the same model the
  // cost used, so selection predicts the Plan that runs. Null: PlanTuning{}.
  PlanTuning (*tune)(const Call& call, const CostModel& model) = nullptr;
};

}  // namespace chorus::algorithms
