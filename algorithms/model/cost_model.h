// The alpha-beta-gamma cost model that selection and the simulator share:
// a message of n bytes costs alpha + n * beta, reducing n bytes costs n * gamma.
//
// There are two levels of link: within a host (local) and between hosts
// (remote, where beta is the host's uplink, which every rank of the host
// shares). Algorithms that ignore the topology see one "flat" link, the
// slowest one their messages cross: the remote one as soon as the job spans
// hosts. Topology-aware (hierarchical) algorithms cost each phase at its level.
//
// A message costs more than its link's latency: the executor posts it,
// matches it, completes it and moves to the next step (step_seconds). The
// link probe measures a bare 8-byte exchange, so from_levels adds the
// executor's part to every level's alpha; every formula then counts it once
// per message. Without it `auto` took halving-doubling (4 messages) where
// recursive doubling (2) was 10-35% faster at 4-32 KiB on shared memory
// (benchmarks/README.md, "The executor's step in the cost model").
#pragma once

#include <algorithm>

#include "base/link_model.h"

namespace chorus::algorithms {

// Fitted on the 2-core VM: 4-rank recursive doubling, halving-doubling and
// ring allreduce of 4-32 KiB take 2.5-3 us per message more than the probe's
// alpha (shared memory and TCP alike).
inline constexpr double kExecutorStepSeconds = 2e-6;

struct CostModel {
  double alpha_seconds = 50e-6;
  double beta_seconds_per_byte = 1e-9;
  // A vectorised fp32 sum streams ~19 GB/s on an idle core, but ranks
  // sharing cores and caches with the progress threads see ~5 GB/s.
  double gamma_seconds_per_byte = 0.2e-9;
  LinkModel local{.alpha_seconds = 50e-6, .beta_seconds_per_byte = 1e-9};
  LinkModel remote{.alpha_seconds = 50e-6, .beta_seconds_per_byte = 1e-9};
  // Already in every alpha above when built by from_levels: what of it is the executor's.
  double step_seconds = 0;
  // The job's fewest cores per rank on one machine, when below one: ranks
  // that share cores (network namespaces or containers of one machine, more
  // ranks than cores). 0 when every rank has a core of its own, or unknown.
  // The same on every rank (connect computes it from what all published),
  // so every rank's `auto` still makes the same choice.
  double cores_per_rank = 0;

  // Where ranks share cores: the cores a call's ranks may use, when not
  // their share of the job's (cores_per_rank each). A phase of a two-level
  // Plan that runs while the call's other ranks wait (the leaders') has all
  // of the call's. 0: their share.
  double available_cores = 0;

  bool shares_cores() const { return cores_per_rank > 0 && cores_per_rank < 1; }

  // Every link alike (one host, or tests).
  static CostModel from_link(const LinkModel& link, double step_seconds = kExecutorStepSeconds) {
    return from_levels(link, link, false, step_seconds);
  }
  // The links as measured (or configured); each alpha gains step_seconds.
  static CostModel from_levels(const LinkModel& local, const LinkModel& remote, bool spans_hosts,
                               double step_seconds = kExecutorStepSeconds) {
    CostModel model;
    model.step_seconds = step_seconds;
    model.local = local;
    model.remote = remote;
    model.local.alpha_seconds += step_seconds;
    model.remote.alpha_seconds += step_seconds;
    const LinkModel& flat = spans_hosts ? model.remote : model.local;
    model.alpha_seconds = flat.alpha_seconds;
    model.beta_seconds_per_byte = flat.beta_seconds_per_byte;
    return model;
  }
  // The same gamma with one level's link as the flat one (a phase of a
  // hierarchical algorithm costed with a flat algorithm's formula).
  CostModel at(LinkLevel level) const {
    CostModel model = *this;
    const LinkModel& link = level == LinkLevel::local ? local : remote;
    model.alpha_seconds = link.alpha_seconds;
    model.beta_seconds_per_byte = link.beta_seconds_per_byte;
    return model;
  }
};

// On shared cores, moving bytes is the CPU's work (a TCP byte is copied by
// its sender's and its receiver's kernel), and a Plan's messages compete
// for the cores more than its critical path shows. The link probe moves
// both directions at once (transport/link_probe.cc), so its beta is that of
// two transfers sharing the cores: a message that moves alone gets about
// twice the speed, while all of them together can go no faster than their
// total work over the cores. A Plan that keeps few ranks busy (a binomial
// broadcast's first round) gains from the first; one that keeps every link
// busy at once (a chain's pipeline) meets the second: on 4 hosts x 1 rank
// of 2 cores, `binomial` broadcast 256 KiB-16 MiB took 15-30% less time than the
// `chain` the plain formula chose (benchmarks/README.md, issue 46, stop 65).
//
// Only the broadcasts price this today. In the other collectives' Plans
// every rank sends and receives in every step, so the bound scales their
// candidates alike and would not change the choice.
inline constexpr double kProbeDirections = 2;

// A byte of a message on the critical path.
inline double lone_beta_seconds_per_byte(const CostModel& model) {
  return model.shares_cores() ? model.beta_seconds_per_byte / kProbeDirections : model.beta_seconds_per_byte;
}

// Seconds for `bytes` in one message on the critical path.
inline double lone_message_seconds(const CostModel& model, double bytes) {
  return model.alpha_seconds + bytes * lone_beta_seconds_per_byte(model);
}

// A Plan's time given its critical path (priced with lone_message_seconds)
// and the messages all its ranks send: `messages` of `bytes` in total.
inline double bounded_by_shared_cores(const CostModel& model, int ranks, double critical_seconds, double messages,
                                      double bytes) {
  if (!model.shares_cores() || ranks <= 0) return critical_seconds;
  const double work = messages * model.alpha_seconds + bytes * model.beta_seconds_per_byte;
  const double cores = model.available_cores > 0 ? model.available_cores : ranks * model.cores_per_rank;
  return std::max(critical_seconds, work / cores);
}

// Rounds of a doubling algorithm (tree broadcast, dissemination barrier).
inline int ceil_log2(int size) {
  int rounds = 0;
  while ((1LL << rounds) < size) ++rounds;
  return rounds;
}

}  // namespace chorus::algorithms
