// The configuration snapshot. Every environment variable the library reads
// (CHORUS_*, and the launchers' through process_environment) is read in
// config.cc and nowhere else (test/core/environment_readers.sh checks it):
// connect() takes one snapshot (Config::from_environment), lets
// ConnectOptions override it, and hands the result down to the transports,
// the selection and the executor.
// So a variable is validated once, at connect, and a program can see in one
// place everything the environment may change. The README's variable table
// lists the same names.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/connections.h"
#include "base/job_secret.h"
#include "base/tls.h"

namespace chorus {

// Where a job's ranks are, as far as its launch says: what a network
// transport binds when no interface or host is named (transport/tcp/socket.h,
// choose_local_address). Never a reason to trust a peer, only a choice of
// which doors to open.
struct JobPlacement {
  // The host the job's store is reached at: the store URL's (set by connect),
  // else torchrun's MASTER_ADDR; empty when unknown (a file store, MPI).
  std::string store_host;
  // The launcher says every rank runs on this host: LOCAL_WORLD_SIZE equals
  // WORLD_SIZE (torchrun, chorus-run), OMPI_COMM_WORLD_LOCAL_SIZE equals
  // OMPI_COMM_WORLD_SIZE (Open MPI), or SLURM_JOB_NUM_NODES is 1.
  bool one_host = false;
};

// The most CHORUS_BOARD_BYTES may be: each member holds two slots of it.
inline constexpr size_t kMaxBoardBytes = size_t{1} << 20;
// The default of CHORUS_BOARD_BYTES: the largest call the board takes in
// one shot (benchmarks/README.md, "The board").
inline constexpr size_t kDefaultBoardBytes = 4096;

struct Config {
  // CHORUS_TRANSPORT: the transports to use, in the order to prefer them
  // ("shm,tcp"); empty: every transport this build has, in its default order.
  std::vector<std::string> transports;
  // CHORUS_SOCKET_IFNAME: the interface whose address network transports publish.
  std::string socket_interface;
  // The launchers' variables above: where the job's ranks are.
  JobPlacement placement;
  // CHORUS_IB_DEVICE: the RDMA device (and port, GID index) the ibverbs
  // transport uses, "mlx5_0[:1[:3]]"; empty: the one behind the address.
  std::string ib_device;
  // CHORUS_HOST_ID: this rank's host identity (ranks with equal ids share
  // memory); empty: derived from the host name and the kernel's boot id.
  std::string host_id;
  // CHORUS_STREAMS: TCP connections per pair of ranks.
  std::optional<int> streams;
  // CHORUS_CONNECTIONS: "full", "on-demand" or "auto" (the default).
  Connections connections = Connections::automatic;
  // CHORUS_POLL_US: how long a waiting collective polls before it sleeps.
  std::optional<std::chrono::microseconds> poll_time;
  // CHORUS_LINK_MODEL: alpha-beta overrides, parsed by base/link_model.h.
  std::string link_model;
  // CHORUS_MEASURE_LINKS: 1 measures each level's links at connect for
  // algorithm selection (transport/link_probe.h), 0 keeps the transports'
  // built-in models. Unset: measure (ConnectOptions::measure_links).
  std::optional<bool> measure_links;
  // CHORUS_ALGO: per-collective algorithm overrides, parsed by the algorithm layer.
  std::string algorithms;
  // CHORUS_SHM_SINGLE_COPY=0: the shared-memory transport copies large
  // messages through its rings instead of process_vm_readv.
  bool shm_single_copy = true;
  // CHORUS_CUDA_IPC_MESSAGES=1: device-memory messages between processes of
  // one host go by CUDA IPC (the receiver copies out of the sender's mapped
  // buffer, then acks) instead of pinned host chunks over shm. Off by
  // default: on the H100 that protocol stalled (docs/cuda.md).
  bool cuda_ipc_messages = false;
  // CHORUS_SECRET, or the contents of the file named by CHORUS_SECRET_FILE
  // (one trailing newline dropped): what every connection of the job proves
  // it knows (base/job_secret.h). Not configured: the job is unauthenticated.
  JobSecret secret;
  // CHORUS_REQUIRE_SECRET=1: connecting without a job secret (from the
  // environment or ConnectOptions) is an error instead of an open job.
  bool require_secret = false;
  // CHORUS_TLS_CERT, CHORUS_TLS_KEY, CHORUS_TLS_CA (all or none): TLS on
  // every TCP pair and TcpStore connection (base/tls.h), loaded and checked
  // at connect. Null: no TLS.
  std::shared_ptr<const TlsContext> tls;
  // CHORUS_MAX_UNEXPECTED_BYTES: bytes of messages that arrived before their
  // receive was posted that a rank buffers per peer connection; a peer past
  // it fails the job with an error naming it. Default 1 GiB.
  size_t max_unexpected_bytes = size_t{1} << 30;
  // CHORUS_BOARD_BYTES: the largest collective on host memory that the ranks
  // of one host exchange through flags in memory they all map instead of
  // messages (algorithms/shared_memory/board.h). 0: never. Unset: the library's default.
  std::optional<size_t> board_bytes;
  // CHORUS_TIMEOUT: seconds (a decimal number) every collective and
  // connecting may take unless the program says otherwise. Unset: 30 s.
  std::optional<std::chrono::milliseconds> timeout;
  // CHORUS_STALL_WARNING_S: seconds without progress before a collective
  // warns that it is stalled, naming the ranks it waits for (at most half
  // its timeout; again each time the quiet doubles). 0: never. Unset: 60.
  std::optional<std::chrono::milliseconds> stall_warning;
  // CHORUS_TRACE: the Chrome trace file of this rank's collectives
  // (base/trace.h; "{rank}" or ".rank<N>" makes it per rank). Empty: none.
  std::string trace;
  // CHORUS_TRACE_STEPS=1: the trace also shows every step of every Plan.
  bool trace_steps = false;

  // Reads and validates the variables above. Throws InvalidArgument naming
  // the variable and its value when one is malformed.
  static Config from_environment();
};

// CHORUS_SECRET or CHORUS_SECRET_FILE alone (what Config::from_environment
// puts in `secret`), for tools that need nothing else: chorus-store, chorus-run.
JobSecret secret_from_environment();

// CHORUS_TLS_CERT, CHORUS_TLS_KEY and CHORUS_TLS_CA loaded (what
// Config::from_environment puts in `tls`); null when none is set. Throws
// InvalidArgument when only some are set or a file is unusable.
std::shared_ptr<const TlsContext> tls_from_environment();

// "shm, tcp" as CHORUS_TRANSPORT reads it: items trimmed of spaces, empty ones dropped.
std::vector<std::string> comma_list(std::string_view text);

// CHORUS_LOG's raw text (empty when unset), read once per process by the
// logger, which runs before any connect and parses it itself.
std::string log_setting_from_environment();

// Throws InvalidArgument naming CHORUS_LOG and the levels when it is set to
// something that is no level (Config::from_environment calls it; so do tools
// that never connect).
void check_log_setting();

// The file an optional module's variable (CHORUS_TLS_MODULE,
// CHORUS_CUDA_MODULE) names instead of the installed one, or nullopt when it
// is unset or empty. Read by base/module_loader.h when the module is first
// needed, which may be before any connect.
std::optional<std::string> module_path_from_environment(std::string_view variable_name);

// Returns the value of an environment variable, or nullopt when it is unset.
// An empty value counts as unset: launchers and shells leave empty variables around.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The process environment as an EnvLookup: how launcher detection
// (rendezvous/launch_env.h) reads torchrun's, Open MPI's and Slurm's variables.
EnvLookup process_environment();

}  // namespace chorus
