// Measuring the links at connect, so algorithm selection costs the network
// the job really has rather than a transport's guess (a TCP device cannot
// tell 1 Gbit/s from 100 Gbit/s, nor loopback from a shaped veth).
//
// Each level of the topology is measured on one pair per couple of ranks,
// all pairs at once, so what is measured includes the contention of a
// collective in which every rank talks:
//  - within a host, local ranks 2i and 2i+1 (by rank order on the host);
//  - between hosts, the first rank of host 2j with the first rank of host
//    2j+1 (hosts in order of their lowest rank): one flow per uplink, which
//    is what the cost model's remote beta means.
// The lower rank of a pair leads; the other answers. Both directions move
// at once, as in a collective's step. Of 30 8-byte exchanges the fastest is
// the link's latency and the median adds what waiting for a core costs;
// beta comes from the fastest of five transfers each way, sized so that one
// takes at least a few milliseconds (64 KiB growing by 4 up to 8 MiB), less
// two fastest exchanges, over its bytes: interference only slows a
// transfer, and the cost model counts shared cores on its own. The job combines every pair's
// numbers (combine_measurements). A link shaped by a token bucket
// lets its first bucketful through at line rate; a
// transfer of several buckets keeps that error small.
//
// On demand (docs/connections.md) this connects the probed pairs: at most
// one within the host and one to another host per rank.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/deadline.h"
#include "base/link_model.h"
#include "transport/mesh.h"

namespace chorus::transport {

// Whom `rank` measures each level with, from every rank's host identity.
struct ProbePartners {
  std::optional<int> local;   // a rank on this host
  std::optional<int> remote;  // a rank on another host
};
ProbePartners probe_partners(int rank, const std::vector<uint64_t>& host_ids);

// What one pair measured.
struct LinkMeasurement {
  double fastest_exchange_seconds = 0;  // the link's latency
  double typical_exchange_seconds = 0;  // the median: latency plus waiting for a core
  double beta_seconds_per_byte = 0;
};

// What this rank measured: set only for the levels it led.
struct MeasuredLinks {
  std::optional<LinkMeasurement> local;
  std::optional<LinkMeasurement> remote;
};

// The job's model per level (local, remote) from every pair's measurement
// of it (an empty list: that level was not measured). Alpha is the median
// fastest exchange of the level plus one waiting time for the whole job:
// the median, over every pair of both levels, of typical less fastest. A
// host with more ranks than cores delays every step of every algorithm
// alike, whichever level it crosses, so the waiting is counted once and the
// same on both levels, and a level probed while its host was busier does
// not look slower than a level probed later. Beta is the level's median.
std::array<std::optional<LinkModel>, 2> combine_measurements(
    const std::array<std::vector<LinkMeasurement>, 2>& by_level);

// Probes this rank's partners, connecting them first where on demand. Every
// rank of the job must call it with the same host ids. Throws what a failed
// transfer throws (naming the peer), TimeoutError past `deadline`, and
// InvalidArgument for a partner asking for a transfer beyond the largest
// probe size.
MeasuredLinks measure_links(Mesh& mesh, const std::vector<uint64_t>& host_ids, Deadline deadline);

}  // namespace chorus::transport
