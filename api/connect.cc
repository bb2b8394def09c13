// Building Contexts: from any Bootstrap, and from the environment contract
// (CHORUS_RANK, CHORUS_SIZE, CHORUS_STORE, CHORUS_JOB_ID).
#include "chorus/connect.h"

#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "algorithms/execution/communicator.h"
#include "algorithms/model/call.h"
#include "algorithms/selection/selection.h"
#include "api/context_state.h"
#include "api/launch_config.h"
#include "api/store_abort_record.h"
#include "backends/registry.h"
#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "base/trace.h"
#include "rendezvous/launch_env.h"
#include "rendezvous/store_url.h"
#include "transport/connect_mesh.h"
#include "transport/published_address.h"

namespace chorus {

namespace {

constexpr int kDefaultStreams = 1;
constexpr std::chrono::milliseconds kHostedStoreLinger{600};
constexpr int kMaxStreams = 16;
constexpr std::chrono::microseconds kDefaultPollTime{200};

int streams_of(const ConnectOptions& options, const Config& config, int rank) {
  if (options.streams && (*options.streams < 1 || *options.streams > kMaxStreams))
    throw InvalidArgument(cat("rank ", rank, ": ConnectOptions::streams = ", *options.streams,
                              " is not a number of streams per peer (1..", kMaxStreams, ")"));
  return options.streams.value_or(config.streams.value_or(kDefaultStreams));
}

std::chrono::microseconds poll_time_of(const ConnectOptions& options, const Config& config, int rank) {
  if (options.poll_time && options.poll_time->count() < 0)
    throw InvalidArgument(cat("rank ", rank, ": ConnectOptions::poll_time must not be negative"));
  return options.poll_time.value_or(config.poll_time.value_or(kDefaultPollTime));
}

std::map<algorithms::Collective, std::string> algorithm_overrides(const Config& config, int rank) {
  // The backends' candidates are named like any other (CHORUS_ALGO=allreduce:nccl).
  backends::register_backends();
  try {
    return algorithms::parse_algorithm_overrides(config.algorithms);
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(cat("rank ", rank, ": CHORUS_ALGO: ", error.what()));
  }
}

// What the transport layer is told: wherever ConnectOptions and the
// environment (Config) both say something, the options win, decided here
// and nowhere below.
transport::MeshSettings mesh_settings(const ConnectOptions& options, const Config& config, int rank, int size,
                                      std::chrono::milliseconds timeout) {
  transport::MeshSettings settings;
  settings.device.rank = rank;
  settings.device.size = size;
  settings.device.config = config;
  settings.device.interface = options.interface;
  settings.device.hostname = options.hostname;
  settings.device.streams = streams_of(options, config, rank);
  settings.device.describe_signature = algorithms::describe_signature;
  settings.transports = options.transports.empty() ? config.transports : options.transports;
  settings.host_id = options.host_id.empty() ? config.host_id : options.host_id;
  settings.timeout = timeout;
  const Connections connections = options.connections.value_or(config.connections);
  settings.on_demand = connections == Connections::on_demand ||
                       (connections == Connections::automatic && size > kFullMeshMaxRanks);
  settings.measure_links =
      size > 1 && options.measure_links.value_or(config.measure_links.value_or(true));
  return settings;
}

// The one read of the environment; everything below gets its part of it.
Config read_config(const ConnectOptions& options, int rank) {
  Config config;
  try {
    config = Config::from_environment();
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(cat("rank ", rank, ": ", error.what()));
  }
  if (!options.secret.empty()) config.secret = JobSecret(options.secret);
  if (config.require_secret && !config.secret.configured())
    throw InvalidArgument(cat("rank ", rank, ": CHORUS_REQUIRE_SECRET=1 but this rank has no job secret: set ",
                              "CHORUS_SECRET or CHORUS_SECRET_FILE on every rank (chorus-run makes one), or pass ",
                              "ConnectOptions::secret"));
  return config;
}

// connect_to_store once the configuration is read (connect_from_env reads it with the launcher's variables).
std::shared_ptr<Context> connect_to_store_with(std::string_view store_url, int rank, int size,
                                               const std::string& job_id, const ConnectOptions& options,
                                               const Config& given_config) {
  // Store URL parsing and opening (tcp, file, redis) live in rendezvous/store_url.h.
  const std::chrono::milliseconds timeout = detail::timeout_of(options, given_config);
  OpenedStore opened = open_store(store_url, rank, job_id, timeout, given_config.secret, given_config.tls);
  // The store's host is where the job lives: network transports bind the
  // address that reaches it (transport/tcp/socket.h, choose_local_address).
  // open_store accepted the URL, so it parses.
  Config config = given_config;
  if (const StoreUrl parsed = parse_store_url(store_url); !parsed.host.empty())
    config.placement.store_host = parsed.host;
  StoreBootstrap bootstrap(opened.store, rank, size, timeout);
  std::shared_ptr<Context> context;
  try {
    context = detail::connect_with(bootstrap, options, config, 0);
  } catch (...) {
    // The other ranks learn why the job cannot start from this rank's store
    // (StoreBootstrap's join error), looking every 200 ms: keep it up that long.
    if (opened.keep_alive) std::this_thread::sleep_for(kHostedStoreLinger);
    throw;
  }
  if (opened.keep_alive) detail::state_of(*context).kept_alive.push_back(opened.keep_alive);
  return context;
}

}  // namespace

std::chrono::milliseconds detail::timeout_of(const ConnectOptions& options, const Config& config) {
  return options.timeout.value_or(config.timeout.value_or(kDefaultTimeout));
}

std::shared_ptr<Context> detail::connect_with(Bootstrap& bootstrap, const ConnectOptions& options,
                                              const Config& config, uint32_t generation) {
  const int rank = bootstrap.rank();
  const int size = bootstrap.size();
  const std::chrono::milliseconds timeout = timeout_of(options, config);

  algorithms::CommunicatorSettings communicator_settings;
  communicator_settings.poll_time = poll_time_of(options, config, rank);
  if (config.stall_warning) communicator_settings.stall_warning = *config.stall_warning;
  if (config.board_bytes) communicator_settings.board_bytes = *config.board_bytes;
  communicator_settings.link_model = options.link_model.empty() ? config.link_model : options.link_model;
  communicator_settings.algorithm_overrides = algorithm_overrides(config, rank);
  // A malformed override fails here, on every rank, not in a collective.
  try {
    apply_link_model_override(communicator_settings.link_model, LinkLevel::local, LinkModel{});
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(cat("rank ", rank, ": CHORUS_LINK_MODEL / ConnectOptions::link_model '",
                              communicator_settings.link_model, "': ", error.what()));
  }

  const std::string trace = options.trace.empty() ? config.trace : options.trace;
  if (!trace.empty()) {
    communicator_settings.trace = TraceFile::open(trace, rank);
    communicator_settings.trace_steps = options.trace_steps.value_or(config.trace_steps);
    CHORUS_LOG(info, rank, "tracing collectives into ", communicator_settings.trace->file_name(),
               communicator_settings.trace_steps ? " (with their steps)" : "");
  }

  const transport::MeshSettings settings = mesh_settings(options, config, rank, size, timeout);
  transport::ConnectedMesh connected = transport::connect_mesh(
      settings, [&](std::span<const std::byte> mine) { return bootstrap.allgather(mine); });
  // Only a Mesh with unconnected pairs ever writes or reads it.
  if (settings.on_demand && bootstrap.store())
    connected.mesh->set_abort_record(std::make_shared<detail::StoreAbortRecord>(bootstrap.store(), generation, rank));
  // Whom a failing rank blames, for the launcher serving the store (chorus-run's last line).
  if (bootstrap.store())
    connected.mesh->set_suspect_record(std::make_shared<detail::StoreSuspectRecord>(bootstrap.store(), generation));
  const std::string override_text = communicator_settings.link_model;
  communicator_settings.local = connected.local;
  communicator_settings.remote = connected.remote;
  communicator_settings.measured = connected.measured;
  // Who may run on this rank's cores (communicator.h: oversubscribed).
  int ranks_on_machine = 0, sharing_cores = 0;
  const auto me = static_cast<size_t>(rank);
  for (size_t r = 0; r < connected.machine_ids.size(); ++r) {
    if (connected.machine_ids[r] != connected.machine_ids[me]) continue;
    ++ranks_on_machine;
    if (transport::share_cpus(connected.cpus[r], connected.cpus[me])) ++sharing_cores;
  }
  communicator_settings.ranks_sharing_cores = sharing_cores;
  communicator_settings.cores_per_rank = transport::fewest_cores_per_rank(connected.machine_ids, connected.cpus);

  auto topology = std::make_shared<const Topology>(Topology::from_host_ids(connected.host_ids));
  // A job without a secret is open to anyone who reaches its listeners from
  // another host: said once, by rank 0, as a warning when other hosts can
  // reach them (a job that spans hosts, or one whose TCP port is on a
  // routable address). On this host the kernel's word on each connection's
  // user keeps other users out (base/socket_owner.h): said once at info.
  if (!config.secret.configured() && rank == 0) {
    bool reachable = topology->hosts() > 1;
    for (const auto& device : connected.mesh->devices()) reachable = reachable || device->listens_beyond_host();
    if (reachable)
      CHORUS_LOG(warn, rank, "this job has no job secret and its listeners can be reached from other hosts",
                 topology->hosts() > 1 ? cat(" (it spans ", topology->hosts(), " hosts)") : std::string(),
                 ": anyone who reaches them could join it or read its keys. Set CHORUS_SECRET or CHORUS_SECRET_FILE "
                 "on every rank (README, Security; chorus-run sets one by itself), or CHORUS_SOCKET_IFNAME=lo for "
                 "a job on one host");
    else
      CHORUS_LOG(info, rank, "this job has no job secret; it stays on this host, and its store and listeners admit "
                 "only processes of this user (uid ", ::geteuid(), "), which the kernel names for each connection. "
                 "Set CHORUS_SECRET or CHORUS_SECRET_FILE to keep out this user's other processes too (docs/security.md)");
  }
  std::vector<int> everyone(static_cast<size_t>(size));
  std::iota(everyone.begin(), everyone.end(), 0);
  algorithms::Communicator communicator(connected.mesh, std::move(everyone), /*group=*/0, topology,
                                        std::move(communicator_settings));
  auto state = std::make_unique<detail::ContextState>(std::move(communicator), timeout);
  state->origin = detail::ContextState::Origin{bootstrap.store(), options, config, generation};
  auto context = detail::ContextAccess::make(std::move(state));
  CHORUS_LOG(info, rank, "joined a job of ", size, " ranks on ", topology->describe(), "; this rank is local rank ",
             context->local_rank(), " of ", context->local_size(), " on host ", connected.host_names[static_cast<size_t>(rank)]);
  if (ranks_on_machine > context->local_size())
    CHORUS_LOG(info, rank, ranks_on_machine, " ranks of this job, on more hosts than this one, run on this machine (one ",
               "kernel: network namespaces or containers); ", sharing_cores, " of them may run on this rank's cores");
  const algorithms::CostModel& model = detail::communicator_of(*context).cost_model();
  auto origin = [&](size_t level) {
    return connected.measured[level] ? "measured" : "built in";
  };
  if (log_enabled(LogLevel::debug) || (rank == 0 && log_enabled(LogLevel::info))) {
    // The links' own alpha; the cost model adds the executor's step to it.
    const std::string models =
        cat("link models: local ", (model.local.alpha_seconds - model.step_seconds) * 1e6, " us, ",
            1e-9 / model.local.beta_seconds_per_byte, " GB/s (", origin(0), "); remote ",
            (model.remote.alpha_seconds - model.step_seconds) * 1e6, " us, ",
            1e-9 / model.remote.beta_seconds_per_byte, " GB/s (", origin(1), ")",
            override_text.empty() ? "" : cat(", then CHORUS_LINK_MODEL / ConnectOptions::link_model '", override_text,
                                             "'"),
            "; the executor adds ", model.step_seconds * 1e6, " us per message",
            model.shares_cores() ? cat("; ranks share cores (", model.cores_per_rank,
                                       " per rank on the most crowded machine), so broadcasts are priced by their "
                                       "total work too")
                                 : std::string());
    if (rank == 0)
      CHORUS_LOG(info, rank, models);
    else
      CHORUS_LOG(debug, rank, models);
  }
  return context;
}

std::shared_ptr<Context> connect(Bootstrap& bootstrap, const ConnectOptions& options) {
  const int rank = bootstrap.rank();
  const int size = bootstrap.size();
  if (size < 1 || rank < 0 || rank >= size)
    throw InvalidArgument(cat("rank ", rank, " is out of range for a job of size ", size));
  return detail::connect_with(bootstrap, options, read_config(options, rank), 0);
}

detail::LaunchConfig detail::read_launch_config(const ConnectOptions& options, std::string_view purpose) {
  LaunchConfig read;
  // Which launcher started us (CHORUS_*, torchrun, Open MPI, PMI, Slurm): see launch_env.h.
  read.launch = detect_launch_env(process_environment());
  CHORUS_LOG(info, read.launch.rank, purpose, ": ", describe(read.launch));
  read.config = read_config(options, read.launch.rank);
  return read;
}

std::shared_ptr<Context> connect_from_env(const ConnectOptions& options) {
  const detail::LaunchConfig read = detail::read_launch_config(options, "launch environment");
  const LaunchEnv& launch = read.launch;
  return connect_to_store_with(launch.store, launch.rank, launch.size, launch.job_id, options, read.config);
}

std::shared_ptr<Context> connect_to_store(std::string_view store_url, int rank, int size, const std::string& job_id,
                                          const ConnectOptions& options) {
  if (size < 1 || rank < 0 || rank >= size)
    throw InvalidArgument(cat("rank ", rank, " is out of range for a job of size ", size));
  return connect_to_store_with(store_url, rank, size, job_id, options, read_config(options, rank));
}

}  // namespace chorus
