// The model network the timing simulator runs Plans on: `hosts` hosts of
// `ranks_per_host` ranks each, ranks numbered host by host.
//
// - Within a host every rank has its own local port in each direction
//   (alpha, beta of the local level): shared memory, where a copy is limited
//   by the two ranks that make it, not by a wire they share.
// - Every host has one uplink and one downlink (alpha, beta of the remote
//   level) that all its ranks share, so concurrent remote messages of one
//   host queue behind each other.
// - Between the hosts a core switch carries hosts x uplink bandwidth /
//   `oversubscription`: 1 is a full-bisection core that never limits, 4 one
//   that carries a quarter of what the hosts could send at once.
// - Each rank has one CPU, reducing or copying a byte costs gamma.
//
// What it leaves out is listed in docs/scale.md (per-message CPU overhead,
// memory bandwidth a host's ranks share, TCP's fair sharing of a link).
#pragma once

#include <memory>
#include <string>

#include "algorithms/model/cost_model.h"
#include "base/link_model.h"
#include "base/topology.h"

namespace chorus::algorithms {

struct NetworkModel {
  int hosts = 1;
  int ranks_per_host = 1;
  LinkModel local{.alpha_seconds = 2e-6, .beta_seconds_per_byte = 1.0 / 20e9};
  LinkModel remote{.alpha_seconds = 5e-6, .beta_seconds_per_byte = 1.0 / 12.5e9};
  double gamma_seconds_per_byte = 1.0 / 10e9;
  double oversubscription = 1.0;
  // What cost_model() adds to each alpha for the executor (algorithms/
  // cost_model.h); the simulator's own timings leave it out.
  double step_seconds = kExecutorStepSeconds;

  int ranks() const { return hosts * ranks_per_host; }
  int host_of(int rank) const { return rank / ranks_per_host; }
  // Throws InvalidArgument for a model no simulation can run (no ranks, a
  // rank count past int, oversubscription below 1, non-positive numbers).
  void validate() const;
  // The topology hierarchical Plans read from their Call.
  std::shared_ptr<const Topology> topology() const;
  // The cost model selection and the algorithms' formulas use for this
  // network; it knows nothing of the core's oversubscription.
  CostModel cost_model() const;
  // "1024 hosts x 8 ranks, local 2 us 20 GB/s, remote 5 us 12.5 GB/s, core 1:4, gamma 10 GB/s"
  std::string describe() const;
};

}  // namespace chorus::algorithms
