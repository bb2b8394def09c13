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
// The lower rank of a pair leads; the other answers. Alpha is half the
// median round trip of 8-byte messages; beta comes from the median time of
// a transfer sized so that it takes at least a few milliseconds (64 KiB
// growing by 4 up to 8 MiB), less two alphas, over its bytes. A link shaped
// by a token bucket lets its first bucketful through at line rate; a
// transfer of several buckets keeps that error small.
//
// On demand (docs/connections.md) this connects the probed pairs: at most
// one within the host and one to another host per rank.
#pragma once

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

// What this rank measured: set only for the levels it led.
struct MeasuredLinks {
  std::optional<LinkModel> local;
  std::optional<LinkModel> remote;
};

// Probes this rank's partners, connecting them first where on demand. Every
// rank of the job must call it with the same host ids. Throws what a failed
// transfer throws (naming the peer), TimeoutError past `deadline`, and
// InvalidArgument for a partner asking for a transfer beyond the largest
// probe size.
MeasuredLinks measure_links(Mesh& mesh, const std::vector<uint64_t>& host_ids, Deadline deadline);

}  // namespace chorus::transport
