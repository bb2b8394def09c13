// Building Contexts: from any Bootstrap, and from the environment contract
// (CHORUS_RANK, CHORUS_SIZE, CHORUS_STORE, CHORUS_JOB_ID).
#include "chorus/connect.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "algorithms/call.h"
#include "chorus/error.h"
#include "chorus/launch_env.h"
#include "chorus/log.h"
#include "rendezvous/store_url.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"

namespace chorus {

namespace {

std::chrono::microseconds poll_time_of(const ConnectOptions& options, int rank) {
  if (options.poll_time) {
    if (options.poll_time->count() < 0)
      throw InvalidArgument(cat("rank ", rank, ": ConnectOptions::poll_time must not be negative"));
    return *options.poll_time;
  }
  const char* text = std::getenv("CHORUS_POLL_US");
  if (!text) return Context::kDefaultPollTime;
  const std::string_view value(text);
  long long microseconds = -1;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), microseconds);
  if (error != std::errc() || end != value.data() + value.size() || microseconds < 0)
    throw InvalidArgument(cat("rank ", rank, ": CHORUS_POLL_US='", value,
                              "' is not a number of microseconds (0 or more)"));
  return std::chrono::microseconds(microseconds);
}

}  // namespace

std::shared_ptr<Context> connect(Bootstrap& bootstrap, const ConnectOptions& options) {
  const int rank = bootstrap.rank();
  const int size = bootstrap.size();
  if (size < 1 || rank < 0 || rank >= size)
    throw InvalidArgument(cat("rank ", rank, " is out of range for a job of size ", size));
  const std::chrono::microseconds poll_time = poll_time_of(options, rank);

  transport::tcp::TcpDeviceOptions device_options;
  device_options.rank = rank;
  device_options.size = size;
  device_options.interface = options.interface;
  device_options.hostname = options.hostname;
  device_options.describe_signature = algorithms::describe_signature;
  std::unique_ptr<transport::Device> device = transport::tcp::create_device(device_options);

  std::vector<std::vector<std::byte>> addresses = bootstrap.allgather(device->address());
  const Deadline deadline = Deadline::after(options.timeout);
  std::vector<std::unique_ptr<transport::Pair>> pairs(static_cast<size_t>(size));
  // Every rank walks peers in the same order; the transport decides who dials
  // and accepts in its progress thread, so this cannot deadlock.
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    pairs[static_cast<size_t>(peer)] = device->connect(peer, addresses[static_cast<size_t>(peer)], deadline);
  }
  // Nobody returns before every rank holds its whole mesh, so a failure to
  // connect shows up here on every rank rather than in the first collective.
  bootstrap.barrier();
  CHORUS_LOG(info, rank, "connected to ", size - 1, " peers");
  auto context = std::make_shared<Context>(rank, size, std::move(device), std::move(pairs), options.timeout);
  context->set_poll_time(poll_time);
  return context;
}

std::shared_ptr<Context> connect_from_env(const ConnectOptions& options) {
  // Which launcher started us (CHORUS_*, torchrun, Open MPI, PMI, Slurm): see launch_env.h.
  const LaunchEnv launch = detect_launch_env(process_environment());
  CHORUS_LOG(info, launch.rank, "launch environment: ", describe(launch));
  const int rank = launch.rank;
  const int size = launch.size;
  // Store URL parsing and opening (tcp, file, redis) live in rendezvous/store_url.h.
  OpenedStore opened = open_store(launch.store, rank, launch.job_id, options.timeout);
  StoreBootstrap bootstrap(opened.store, rank, size, options.timeout);
  std::shared_ptr<Context> context = connect(bootstrap, options);
  if (opened.keep_alive) context->keep_alive(opened.keep_alive);
  return context;
}

}  // namespace chorus
