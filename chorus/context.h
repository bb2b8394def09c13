// A Context is one rank's membership in a group of ranks: its rank, the
// group's size and topology (which ranks share a host), the connections to
// the others and the numbering of collectives. connect() builds the first
// Context of a job; split() builds sub-groups of it that reuse its
// connections (PyTorch's new_group, Horovod's local and cross communicators).
//
// Collectives on a Context must be issued in the same order on every rank (as
// in MPI and NCCL); the Context numbers them so callers never manage tags.
// Collectives on a Context and on Contexts split from it may interleave in
// any order that every rank agrees on.
//
// A Context and every Context split from it share one set of connections
// and fail together: after any error (dead peer, timeout, mismatch, abort)
// every later call on any of them throws that first error again.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/statistics.h"

namespace chorus {
namespace detail {
struct ContextState;
struct ContextAccess;
}  // namespace detail

// How one peer is connected: the transport serving it and its connections.
struct PeerLink {
  std::string transport;  // "shm", "tcp", ...
  int streams = 1;
  // Whether the connections exist yet: always with the full mesh; on demand
  // (ConnectOptions::connections), once a collective or message needed them.
  bool connected = true;
  // What algorithm selection assumes of the pair's level of the topology
  // (within the host or between hosts), the same on every rank: measured at
  // connect unless ConnectOptions::measure_links / CHORUS_MEASURE_LINKS says
  // not to, then CHORUS_LINK_MODEL / ConnectOptions::link_model applied.
  double alpha_seconds = 0;           // per message
  double beta_seconds_per_byte = 0;   // 1 / bandwidth
  bool measured = false;              // false: the transport's built-in model
};

class Context {
 public:
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const;
  int size() const;

  // Topology. Ranks publish a host identity at connect (CHORUS_HOST_ID
  // overrides it); hosts are numbered in order of their lowest rank.
  int hosts() const;
  int host_of(int rank) const;
  // This rank's index among the ranks of its host, and their number.
  int local_rank() const;
  int local_size() const;
  PeerLink link_to(int peer) const;

  // Default for every collective; an options struct may override per call.
  std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds timeout);

  // MPI_Comm_split: a collective call on this Context. Ranks passing the
  // same color form a child Context, ranked by (key, rank in this Context);
  // a rank passing kNoColor takes part and gets null. Children reuse this
  // Context's connections, number their collectives on their own, and
  // outlive this Context and their siblings if need be.
  static constexpr int kNoColor = -1;
  std::shared_ptr<Context> split(int color, int key);

  // Unblocks every pending and later operation with Aborted(reason), on this
  // Context and on every Context sharing its connections. Any thread.
  void abort(const std::string& reason = "aborted by the application");
  // Throws the error that finished this Context, if any.
  void throw_if_failed() const;

  ContextStatistics statistics() const;

 private:
  friend struct detail::ContextAccess;
  explicit Context(std::unique_ptr<detail::ContextState> state);
  std::unique_ptr<detail::ContextState> state_;
};

}  // namespace chorus
