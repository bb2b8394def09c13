// Building a Mesh: create a Device for each transport this rank offers,
// publish their addresses (with the host identity) through the bootstrap's
// allgather, choose per peer the first transport both ranks offer that can
// connect them, check every peer's address, then connect. Knows the
// bootstrap only as two functions, so the transport layer stays below
// rendezvous.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/mesh.h"
#include "transport/registry.h"

namespace chorus::transport {

struct MeshSettings {
  DeviceOptions device;  // rank, size, configuration, network address, streams
  // In order of preference (ConnectOptions::transports, else
  // CHORUS_TRANSPORT); empty: every transport of the build.
  std::vector<std::string> transports;
  // CHORUS_HOST_ID / ConnectOptions::host_id, empty for the real host.
  std::string host_id;
  std::chrono::milliseconds timeout{30000};
  // Connect no pair here: each when a collective or message first needs it
  // (Mesh::connect). Addresses are still checked here, on every rank.
  bool on_demand = false;
  // Measure each level's alpha and beta on a few pairs (link_probe.h) and
  // let the job agree on the medians; false: the transports' own models.
  bool measure_links = true;
};

struct ConnectedMesh {
  std::shared_ptr<Mesh> mesh;
  std::vector<uint64_t> host_ids;        // by rank
  std::vector<uint64_t> machine_ids;     // by rank (PublishedAddress::machine_id)
  std::vector<std::vector<uint64_t>> cpus;  // by rank (PublishedAddress::cpus)
  std::vector<std::string> host_names;   // by rank
  // The link of the whole job within a host and between hosts, the same on
  // every rank (algorithm selection must agree everywhere): the median of
  // what the level's probed pairs measured, else the slowest of the
  // transports' own models. A level no pair of the job has takes the other
  // level's model.
  LinkModel local;
  LinkModel remote;
  std::array<bool, 2> measured{};  // local, remote: from measurement
};

using Allgather = std::function<std::vector<std::vector<std::byte>>(std::span<const std::byte>)>;

// Two rounds of `allgather`: the addresses, then (once this rank holds a
// Pair to every peer, unless on demand) each rank's slowest link per level.
// So with the full mesh it returns only once every rank is connected, a
// failure to connect shows here on every rank, not in the first collective,
// and every rank learns the same link models (on demand too: they come from
// the routes, not the Pairs). Throws InvalidArgument (bad settings, no transport reaches a peer,
// peers that disagree) or IoError/TimeoutError naming the peer.
ConnectedMesh connect_mesh(const MeshSettings& settings, const Allgather& allgather);

}  // namespace chorus::transport
