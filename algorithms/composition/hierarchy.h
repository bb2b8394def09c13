// What the topology-aware (hierarchical) algorithms share: who leads each
// host, which flat algorithm each phase runs and what that phase costs.
//
// A hierarchical Plan is made of phases that each run a flat algorithm on a
// subset of the ranks: the ranks of one host (links of the local level), or
// one rank per host (the remote level). Each phase picks the flat algorithm
// the cost model of its level says is cheapest for it, so a host whose
// ranks share memory runs whatever suits shared memory while the uplinks
// run whatever suits the network. The choices are pure functions of the
// call, the topology and the cost model, which every rank agrees on, so the
// ranks of one phase always choose alike.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "algorithms/model/call.h"
#include "algorithms/model/cost_model.h"
#include "algorithms/model/plan.h"
#include "algorithms/model/algorithm.h"
#include "base/link_model.h"

namespace chorus::algorithms {

// Each phase of a hierarchical Plan numbers its messages from its own base,
// k * phase_slot_span, so two phases sharing a pair never match each other's.
inline constexpr uint32_t phase_slot_span = uint32_t{1} << 30;

// The call spans at least two hosts and some host holds two ranks or more:
// only then does a hierarchical algorithm differ from a flat one.
bool has_two_levels(const Call& call);

// A call of the same type, op and memory on a subset of ranks. It carries
// the parent's chain (Call::previous_root): a phase that runs as a call of
// its own (the host boards' rails and boards) compares it in its frames and
// slots, or ranks that finished a rooted call with different roots would
// pass the next call on those phases unseen.
Call phase_call(const Call& parent, Collective collective, int rank, int size, size_t count, int root,
                bool in_place);

// The leader of each host, by host number: the root's own rank on the root's
// host, the lowest rank elsewhere.
std::vector<int> host_leaders(const Topology& topology, int root);

// The cheapest flat algorithm for `phase` under `level_model`, and its cost.
struct PhaseCost {
  const Algorithm* algorithm = nullptr;
  double seconds = 0;
};
PhaseCost cheapest_flat(const Call& phase, const CostModel& level_model);

// The algorithm and tuning a phase runs. With a cost model in `parent`, the
// cheapest flat algorithm for `choose_by` (a call describing the load the
// phase puts on its links; often the phase's call itself) at `level`;
// without one, `fallback`. Tuning comes from the chosen algorithm's own
// tune() where it has one, else from `parent`.
struct PhaseAlgorithm {
  const Algorithm* algorithm = nullptr;
  PlanTuning tuning;
};
// `available_cores`: CostModel::available_cores for the phase (0: its share).
PhaseAlgorithm choose_phase_algorithm(const Call& phase, const Call& choose_by, LinkLevel level,
                                      const PlanTuning& parent, std::string_view fallback,
                                      double available_cores = 0);

// The cores of all of `call`'s ranks where they share cores, else 0: what a
// phase that runs while the others wait may use (CostModel::available_cores).
double whole_call_cores(const Call& call, const CostModel& model);

// The tuning of every hierarchical algorithm: it carries the cost model into
// the Plan (PlanTuning::cost_model), which chooses every phase's flat algorithm.
PlanTuning hierarchical_tuning(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
