// Choosing how to project, and checking the symmetry a symmetric run assumes.
#include "simulation/projection.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {

Plan plan_of(const Algorithm& algorithm, const Call& call, const PlanTuning& tuning, int rank) {
  Call rank_call = call;
  rank_call.rank = rank;
  return algorithm.build(rank_call, tuning);
}

// The relabelling that moves host 0 to host k, applied to `rank`.
int move_host(int rank, int k, HostSymmetry symmetry, const NetworkModel& network) {
  const int host = network.host_of(rank), local = rank % network.ranks_per_host;
  const int moved = symmetry == HostSymmetry::rotation ? (host + k) % network.hosts : host ^ k;
  return moved * network.ranks_per_host + local;
}

// `moved` (rank g(r)'s Plan) is `original` (rank r's) with every peer
// relabelled by g, step by step: the same kinds, byte counts and
// dependencies, so both take the same time at the same moments.
bool same_under_relabelling(const Plan& original, const Plan& moved, int k, HostSymmetry symmetry,
                            const NetworkModel& network) {
  if (original.size() != moved.size()) return false;
  for (StepId id = 0; id < original.size(); ++id) {
    const Step& a = original.step(id);
    const Step& b = moved.step(id);
    if (a.kind != b.kind || a.bytes() != b.bytes() || a.to.length != b.to.length) return false;
    if (a.is_communication() && move_host(a.peer, k, symmetry, network) != b.peer) return false;
    const auto a_after = original.dependencies(a), b_after = moved.dependencies(b);
    if (!std::equal(a_after.begin(), a_after.end(), b_after.begin(), b_after.end())) return false;
  }
  return true;
}

// Hosts a symmetry is checked on: the next one, the middle one and the last.
std::vector<int> sample_hosts(int hosts) {
  std::vector<int> sample;
  for (int k : {1, hosts / 2, hosts - 1})
    if (k > 0 && k < hosts && std::find(sample.begin(), sample.end(), k) == sample.end()) sample.push_back(k);
  return sample;
}

// The first relabelling of hosts that maps host 0's Plans onto those of every
// sampled host, or none.
HostSymmetry find_symmetry(const Algorithm& algorithm, const Call& call, const PlanTuning& tuning,
                           const NetworkModel& network, const std::vector<Plan>& host_zero) {
  if (network.hosts < 2) return HostSymmetry::none;
  std::vector<HostSymmetry> candidates{HostSymmetry::rotation};
  if ((network.hosts & (network.hosts - 1)) == 0) candidates.push_back(HostSymmetry::exclusive_or);
  for (int k : sample_hosts(network.hosts)) {
    for (int local = 0; local < network.ranks_per_host && !candidates.empty(); ++local) {
      // Rotation and xor move host 0 to the same host k, so one Plan serves both.
      const Plan moved = plan_of(algorithm, call, tuning, k * network.ranks_per_host + local);
      std::erase_if(candidates, [&](HostSymmetry symmetry) {
        return !same_under_relabelling(host_zero[static_cast<size_t>(local)], moved, k, symmetry, network);
      });
    }
  }
  return candidates.empty() ? HostSymmetry::none : candidates.front();
}

Projection simulate_all(const Algorithm& algorithm, const Call& call, const PlanTuning& tuning,
                        const NetworkModel& network, const ProjectionOptions& options) {
  std::vector<Plan> plans;
  plans.reserve(static_cast<size_t>(network.ranks()));
  size_t steps = 0;
  for (int rank = 0; rank < network.ranks(); ++rank) {
    plans.push_back(plan_of(algorithm, call, tuning, rank));
    steps += plans.back().size();
    if (steps > options.step_budget)
      throw InvalidArgument(cat("projection: simulating every rank of ", algorithm.name, " takes more than ",
                                options.step_budget, " steps"));
  }
  std::vector<const Plan*> pointers;
  for (const Plan& plan : plans) pointers.push_back(&plan);
  const TimingReport report = simulate_timing(pointers, network, HostSymmetry::none, options.send_limit);
  return Projection{report.seconds, ProjectionMethod::simulated, HostSymmetry::none, report.steps};
}

}  // namespace

std::string_view to_string(ProjectionMethod method) {
  switch (method) {
    case ProjectionMethod::automatic: return "automatic";
    case ProjectionMethod::simulated: return "simulated";
    case ProjectionMethod::symmetric: return "symmetric";
    case ProjectionMethod::formula: return "formula";
  }
  return "?";
}

Call model_call(Collective collective, size_t count, const NetworkModel& network) {
  Call call = make_call(collective, 0, network.ranks(), count, DataType::float32, ReduceOp::sum, 0, false);
  call.topology = network.topology();
  return call;
}

double formula_seconds(const Algorithm& algorithm, const Call& call, const NetworkModel& network) {
  CostModel model = network.cost_model();
  model.remote.beta_seconds_per_byte *= network.oversubscription;
  if (network.hosts > 1) model.beta_seconds_per_byte = model.remote.beta_seconds_per_byte;
  return algorithm.cost_seconds(call, model);
}

Projection project(const Algorithm& algorithm, const Call& call, const NetworkModel& network,
                   const ProjectionOptions& options) {
  network.validate();
  if (call.size != network.ranks())
    throw InvalidArgument(cat("projection: the call has ", call.size, " ranks, the network ", network.ranks()));
  if (!algorithm.supports(call))
    throw InvalidArgument(cat("projection: ", algorithm.name, " does not support this ", to_string(call.collective)));
  if (options.method == ProjectionMethod::formula)
    return Projection{formula_seconds(algorithm, call, network), ProjectionMethod::formula, HostSymmetry::none, 0};

  const PlanTuning tuning = plan_tuning(algorithm, call, network.cost_model());
  if (options.method == ProjectionMethod::simulated) return simulate_all(algorithm, call, tuning, network, options);

  // Host 0's Plans: all a symmetric run needs, and a first measure of size.
  std::vector<Plan> host_zero;
  size_t host_zero_steps = 0, largest = 0;
  for (int rank = 0; rank < network.ranks_per_host; ++rank) {
    host_zero.push_back(plan_of(algorithm, call, tuning, rank));
    host_zero_steps += host_zero.back().size();
    largest = std::max(largest, host_zero.back().size());
  }
  // A symmetric run when the Plans allow it: it is exact where every host
  // really does the same (no core limit; tested against full runs) and
  // hosts times cheaper.
  const HostSymmetry symmetry =
      host_zero_steps <= options.step_budget ? find_symmetry(algorithm, call, tuning, network, host_zero)
                                             : HostSymmetry::none;
  if (symmetry != HostSymmetry::none) {
    std::vector<const Plan*> pointers;
    for (const Plan& plan : host_zero) pointers.push_back(&plan);
    const TimingReport report = simulate_timing(pointers, network, symmetry, options.send_limit);
    return Projection{report.seconds, ProjectionMethod::symmetric, symmetry, report.steps};
  }
  if (options.method == ProjectionMethod::symmetric)
    throw InvalidArgument(cat("projection: ", algorithm.name, "'s Plans are not the same on every host (",
                              host_zero_steps > options.step_budget ? "host 0's alone exceed the step budget"
                                                                    : "no rotation or xor of hosts maps them",
                              ")"));
  // Rooted algorithms give the root's host the most work; the last rank
  // is a second sample of the others.
  if (network.hosts > 1) largest = std::max(largest, plan_of(algorithm, call, tuning, network.ranks() - 1).size());
  if (largest * static_cast<size_t>(network.ranks()) <= options.step_budget)
    return simulate_all(algorithm, call, tuning, network, options);
  return Projection{formula_seconds(algorithm, call, network), ProjectionMethod::formula, HostSymmetry::none, 0};
}

}  // namespace chorus::algorithms
