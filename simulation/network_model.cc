// Checks and derived views of a NetworkModel.
#include "simulation/network_model.h"

#include <cmath>
#include <limits>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {

bool positive_finite(double value) { return value > 0 && std::isfinite(value); }

std::string describe_link(const LinkModel& link) {
  return cat(link.alpha_seconds * 1e6, " us ", 1e-9 / link.beta_seconds_per_byte, " GB/s");
}

}  // namespace

void NetworkModel::validate() const {
  if (hosts < 1 || ranks_per_host < 1)
    throw InvalidArgument(cat("network model: hosts and ranks per host must be at least 1, got ", hosts, " x ",
                              ranks_per_host));
  if (static_cast<long long>(hosts) * ranks_per_host > std::numeric_limits<int>::max())
    throw InvalidArgument(cat("network model: ", hosts, " x ", ranks_per_host, " ranks is more than a job can hold"));
  if (!(oversubscription >= 1) || !std::isfinite(oversubscription))
    throw InvalidArgument(cat("network model: oversubscription must be a number >= 1, got ", oversubscription));
  for (const LinkModel* link : {&local, &remote})
    if (!positive_finite(link->alpha_seconds) || !positive_finite(link->beta_seconds_per_byte))
      throw InvalidArgument("network model: link latency and bandwidth must be positive");
  if (!(gamma_seconds_per_byte >= 0) || !std::isfinite(gamma_seconds_per_byte))
    throw InvalidArgument("network model: gamma must be a non-negative number");
}

std::shared_ptr<const Topology> NetworkModel::topology() const {
  return std::make_shared<const Topology>(Topology::blocks(std::vector<int>(static_cast<size_t>(hosts), ranks_per_host)));
}

CostModel NetworkModel::cost_model() const {
  CostModel model = CostModel::from_levels(local, remote, hosts > 1, step_seconds);
  model.gamma_seconds_per_byte = gamma_seconds_per_byte;
  return model;
}

std::string NetworkModel::describe() const {
  return cat(hosts, " hosts x ", ranks_per_host, " ranks, local ", describe_link(local), ", remote ",
             describe_link(remote), ", core 1:", oversubscription, ", gamma ", 1e-9 / gamma_seconds_per_byte,
             " GB/s");
}

}  // namespace chorus::algorithms
