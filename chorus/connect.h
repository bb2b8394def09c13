// Building a Context: exchange transport addresses through a Bootstrap, then
// connect a Pair to every other rank (a full mesh).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/bootstrap.h"
#include "chorus/context.h"

namespace chorus {

struct ConnectOptions {
  // Default timeout of every collective on the Context, and of connecting.
  std::chrono::milliseconds timeout{30000};
  // Address to publish for this rank. Empty: CHORUS_SOCKET_IFNAME, else the
  // interface of the default route, else loopback (single-host jobs only).
  std::string interface;   // network interface name, e.g. "eth0"
  std::string hostname;    // or an explicit address / host name to bind and publish
  // How long a collective with nothing to do reads its sockets itself before
  // it sleeps (docs/latency.md). Unset: CHORUS_POLL_US, else
  // Context::kDefaultPollTime. Longer trades CPU for small-message latency.
  std::optional<std::chrono::microseconds> poll_time;
  // TCP connections per pair of ranks, 1..Context::kMaxStreams; messages of
  // at least 512 KiB are striped over all of them (docs/streams.md). Unset:
  // CHORUS_STREAMS, else Context::kDefaultStreams. Every rank must use the
  // same value: connect() fails on every rank, naming both counts, if not.
  std::optional<int> streams;
};

std::shared_ptr<Context> connect(Bootstrap& bootstrap, const ConnectOptions& options = {});

// Reads CHORUS_RANK, CHORUS_SIZE, CHORUS_STORE (tcp://host:port or
// file:///dir) and CHORUS_JOB_ID. With tcp://, rank 0 hosts the store
// in-process (or uses a standalone chorus-store already serving that port).
std::shared_ptr<Context> connect_from_env(const ConnectOptions& options = {});

}  // namespace chorus
