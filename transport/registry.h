// The registry of transports: by name, a factory for its Device and a probe
// that says, from what two ranks published, whether that transport can
// connect them (NCCL's canConnect). The order of the table is the default
// preference: shared memory for ranks on one host, then RDMA where present,
// then TCP, which reaches anything. Each peer is served by the first
// transport, in the lower rank's order, that both ranks offer and that can
// connect them; CHORUS_TRANSPORT / ConnectOptions::transports restrict and
// reorder the list. Adding a transport means one entry here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/config.h"
#include "transport/positions.h"
#include "transport/transport.h"

namespace chorus::transport {

// What every transport's factory receives.
struct DeviceOptions {
  int rank = 0;
  int size = 1;
  // The snapshot the Context was built from; transports read their own settings.
  // config.secret is what every connection of every transport must prove
  // before it is admitted (base/job_secret.h): a transport added here passes
  // it to its device, whose handshake runs the challenge-response.
  Config config;
  // Where network transports listen and what they publish: an interface
  // name, else a host name or address, else config.socket_interface, else
  // the address config.placement points to (tcp/socket.h, choose_local_address).
  std::string interface;
  std::string hostname;
  // Connections per peer, for transports that stripe (tcp).
  int streams = 1;
  // Turns a tag signature into words for MismatchError text.
  std::function<std::string(uint64_t)> describe_signature;
  // Where this rank is in each Context (transport/positions.h): what its
  // answers to liveness probes report. Null: nothing known.
  std::shared_ptr<const PositionTable> positions;
};

// One rank as a probe sees it.
struct PeerView {
  int rank = -1;
  uint64_t host_id = 0;
  // The transport's section of the rank's published address.
  std::span<const std::byte> address;
};

struct TransportEntry {
  std::string_view name;
  std::unique_ptr<Device> (*create)(const DeviceOptions& options);
  // Whether devices of this transport on ranks `a` and `b` can reach each
  // other, from what both published. Must be symmetric: both ranks ask it.
  bool (*can_connect)(const PeerView& a, const PeerView& b);
};

// Every transport of this build, in the default order of preference.
std::span<const TransportEntry> all_transports();
// Null when this build has no transport of that name.
const TransportEntry* find_transport(std::string_view name);
// "shm, tcp"
std::string transport_names();

}  // namespace chorus::transport
