// The alpha-beta-gamma cost model that selection and the simulator share:
// a message of n bytes costs alpha + n * beta, reducing n bytes costs n * gamma.
#pragma once

#include "transport/transport.h"

namespace chorus::algorithms {

struct CostModel {
  double alpha_seconds = 50e-6;
  double beta_seconds_per_byte = 1e-9;
  // A vectorised fp32 sum streams ~19 GB/s on an idle core, but ranks
  // sharing cores and caches with the progress threads see ~5 GB/s.
  double gamma_seconds_per_byte = 0.2e-9;

  static CostModel from_link(const LinkModel& link) {
    CostModel model;
    model.alpha_seconds = link.alpha_seconds;
    model.beta_seconds_per_byte = link.beta_seconds_per_byte;
    return model;
  }
};

// Rounds of a doubling algorithm (tree broadcast, dissemination barrier).
inline int ceil_log2(int size) {
  int rounds = 0;
  while ((1LL << rounds) < size) ++rounds;
  return rounds;
}

}  // namespace chorus::algorithms
