// Projects how long one algorithm takes for one call on a model network:
// by simulating one host's ranks when the Plans are symmetric under
// relabelling hosts, else every rank's Plan (simulation/timing_simulator.h)
// when the job is small enough, and else by the algorithm's own cost
// formula. The result says which, so a table never passes a formula off as
// a simulation.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "algorithms/model/call.h"
#include "algorithms/selection/registry.h"
#include "algorithms/model/schedule.h"
#include "simulation/network_model.h"
#include "simulation/timing_simulator.h"

namespace chorus::algorithms {

enum class ProjectionMethod {
  automatic,  // as a request: symmetric where the Plans are, else simulated within the budget, else formula
  simulated,  // every rank's Plan simulated
  symmetric,  // host 0's Plans simulated, standing for every host
  formula,    // the algorithm's cost_seconds
};
std::string_view to_string(ProjectionMethod method);

struct ProjectionOptions {
  ProjectionMethod method = ProjectionMethod::automatic;
  // The most Plan steps a simulation may hold (about 150 bytes of memory
  // each with the scheduler's state).
  size_t step_budget = 8'000'000;
  SendLimit send_limit;
};

struct Projection {
  double seconds = 0;
  ProjectionMethod method = ProjectionMethod::formula;
  HostSymmetry symmetry = HostSymmetry::none;  // of a symmetric run
  size_t simulated_steps = 0;
};

// The call every rank of `network` makes (rank 0's), with the network's topology.
Call model_call(Collective collective, size_t count, const NetworkModel& network);

// The formula: the algorithm's cost under network.cost_model(), with the
// remote bandwidth divided by the oversubscription (as if the core were
// always the bottleneck, which the formulas cannot tell).
double formula_seconds(const Algorithm& algorithm, const Call& call, const NetworkModel& network);

// Throws InvalidArgument when the algorithm does not support the call, when
// call.size is not the network's rank count, or when a forced method cannot
// run (symmetric for Plans that are not, simulated past the budget).
Projection project(const Algorithm& algorithm, const Call& call, const NetworkModel& network,
                   const ProjectionOptions& options = {});

}  // namespace chorus::algorithms
