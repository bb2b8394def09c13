// Building a Context: exchange addresses through a Bootstrap, then connect
// every pair of ranks over the first transport that reaches it (shared
// memory on one host, TCP across hosts; transport/registry.h).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/connections.h"
#include "chorus/context.h"
#include "rendezvous/bootstrap.h"

namespace chorus {

// When nothing sets a timeout: long enough for a slow rank to start, short
// enough that a hung job names its culprit within the minute.
inline constexpr std::chrono::milliseconds kDefaultTimeout{30000};

struct ConnectOptions {
  // Default timeout of every collective on the Context, and of connecting.
  // Unset: CHORUS_TIMEOUT (seconds), else kDefaultTimeout (30 s).
  std::optional<std::chrono::milliseconds> timeout;
  // The transports to use, in order of preference ("shm", "tcp"); each peer
  // is served by the first that reaches it. Empty: CHORUS_TRANSPORT, else
  // every transport of this build (shared memory first, TCP last).
  std::vector<std::string> transports;
  // Address network transports bind and publish for this rank. Empty: the
  // interface in CHORUS_SOCKET_IFNAME, else where the job lives (loopback
  // for a store on loopback or a launcher that puts every rank on this host,
  // else the address that routes to the store; docs/security.md).
  std::string interface;   // network interface name, e.g. "eth0"
  std::string hostname;    // or an explicit address / host name to bind and publish
  // This rank's host identity: ranks with equal ids are on one host (shared
  // memory, the local level of hierarchical algorithms). Empty:
  // CHORUS_HOST_ID, else derived from the host name and boot id.
  std::string host_id;
  // How long a collective with nothing to do polls its connections itself
  // before it sleeps (docs/latency.md). Unset: CHORUS_POLL_US, else 200 µs.
  // Longer trades CPU for small-message latency.
  std::optional<std::chrono::microseconds> poll_time;
  // TCP connections per pair of ranks, 1..16; messages of at least 512 KiB
  // are striped over all of them (docs/streams.md). Unset: CHORUS_STREAMS,
  // else 1. Every rank must use the same value: connect() fails on every
  // rank, naming both counts, if not.
  std::optional<int> streams;
  // Whether every pair of ranks connects here (full mesh) or when a
  // collective or message first needs it (on demand; docs/connections.md).
  // Unset: CHORUS_CONNECTIONS, else automatic: the full mesh up to
  // kFullMeshMaxRanks (64) ranks, on demand above.
  std::optional<Connections> connections;
  // Link model overrides for algorithm selection, as CHORUS_LINK_MODEL
  // ("alpha_us=25,gbps=2", "local:...;remote:gbps=0.125"). Empty: that variable.
  std::string link_model;
  // Whether connect measures alpha and beta within and between hosts on a
  // few pairs of ranks (a few ms; transport/link_probe.h) for algorithm
  // selection; link_model then overrides parts of what was measured. Every
  // rank must agree. Unset: CHORUS_MEASURE_LINKS, else yes, with the full
  // mesh and on demand alike (docs/link_models.md).
  std::optional<bool> measure_links;
  // The job secret every connection proves (the store's and every
  // transport's; README "Security"). Empty: CHORUS_SECRET, else the file
  // CHORUS_SECRET_FILE, else none: the job is unauthenticated, and a job that
  // spans hosts logs a warning.
  std::string secret;
  // A Chrome trace of this rank's collectives (docs/trace.md): the file
  // name, where "{rank}" stands for the rank (else ".rank<N>" is inserted
  // before the extension). Empty: CHORUS_TRACE, else no trace.
  std::string trace;
  // The trace also shows each step of each collective. Unset: CHORUS_TRACE_STEPS.
  std::optional<bool> trace_steps;
};

std::shared_ptr<Context> connect(Bootstrap& bootstrap, const ConnectOptions& options = {});

// Reads CHORUS_RANK, CHORUS_SIZE, CHORUS_STORE (tcp://host:port or
// file:///dir) and CHORUS_JOB_ID, or another launcher's variables (README).
// With tcp://, rank 0 hosts the store in-process (or uses a standalone
// chorus-store already serving that port).
std::shared_ptr<Context> connect_from_env(const ConnectOptions& options = {});

// connect_from_env with the rendezvous named by the caller instead of a
// launcher's variables (a framework that knows its rank and size): the
// store URL (as CHORUS_STORE), this rank, the job size and a job id (as
// CHORUS_JOB_ID; empty only with tcp://). The other CHORUS_* variables still
// apply. Several Contexts of one job may meet at one store under different
// job ids.
std::shared_ptr<Context> connect_to_store(std::string_view store_url, int rank, int size, const std::string& job_id,
                                          const ConnectOptions& options = {});

}  // namespace chorus
