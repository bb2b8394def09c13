// Times real Plans on a model network (simulation/network_model.h) without
// data: no buffers and no copies, only when each step of each rank finishes.
//
// It follows the Executor's rules through the same StepScheduler (queues per
// peer and direction, the send limit) and times them event by event:
// - a send costs its rank alpha (of the level it crosses) before its bytes
//   go, one message at a time per rank: alpha is the price of a message,
//   not a latency any number of messages hide behind one another;
// - then its bytes hold every link they cross for bytes x beta: the two
//   ranks' local ports within a host; the sender host's uplink, the
//   receiver host's downlink and, with an oversubscribed core, one of the
//   core's hosts / oversubscription lanes between hosts. Links are booked
//   in the order messages are posted, each message in the earliest gap that
//   fits it on every link (simulation/link_calendar.h): no fair sharing of
//   one link between messages, which TCP would do.
// - a receive finishes when its message has arrived and it is posted;
// - reduce and copy steps take bytes x gamma on their rank's one CPU.
// The Plans are not checked for data races or wrong results: that is the
// data simulator's job (simulation/simulator.h); a deadlock is still found.
//
// Symmetric runs: when every host runs the same Plans up to a relabelling of
// hosts that keeps the network the same (a rotation h -> h + k, or h -> h xor
// k for a power-of-two host count), all hosts finish each step at the same
// time, so host 0's ranks stand for the job: a message to another host is
// received, in host 0's frame, as the same message sent to host 0 by the host
// the relabelling moves there; the core, which every host then crosses at
// once, gives each host 1/oversubscription of its uplink. The caller vouches
// for the symmetry (simulation/projection.h checks it on sample hosts).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "algorithms/model/plan.h"
#include "algorithms/model/schedule.h"
#include "simulation/network_model.h"

namespace chorus::algorithms {

// How the simulated ranks stand for the job.
enum class HostSymmetry {
  none,      // every rank is simulated
  rotation,  // host 0 stands for all; host h runs host 0's Plans with host h' -> h' + h (mod hosts)
  exclusive_or,  // the same with h' -> h' xor h (a power-of-two host count)
};
std::string_view to_string(HostSymmetry symmetry);

struct TimingReport {
  double seconds = 0;  // when the last step of any rank finishes
  size_t steps = 0;     // steps simulated
  size_t messages = 0;  // sends simulated
};

// plans[r] is rank r's Plan: every rank of `network` for HostSymmetry::none,
// host 0's ranks (0 .. ranks_per_host-1) otherwise. Throws InvalidArgument
// for a wrong number of Plans or a peer outside the job, Error for a
// deadlock or a message no one receives.
TimingReport simulate_timing(std::span<const Plan* const> plans, const NetworkModel& network,
                             HostSymmetry symmetry = HostSymmetry::none, const SendLimit& send_limit = {});

}  // namespace chorus::algorithms
