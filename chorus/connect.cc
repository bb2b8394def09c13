// Building Contexts: from any Bootstrap, and from the environment contract
// (CHORUS_RANK, CHORUS_SIZE, CHORUS_STORE, CHORUS_JOB_ID).
#include "chorus/connect.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "algorithms/call.h"
#include "base/error.h"
#include "rendezvous/launch_env.h"
#include "base/log.h"
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

int streams_of(const ConnectOptions& options, int rank) {
  auto invalid = [&](const std::string& what) {
    return InvalidArgument(cat("rank ", rank, ": ", what, " is not a number of streams per peer (1..",
                               Context::kMaxStreams, ")"));
  };
  if (options.streams) {
    if (*options.streams < 1 || *options.streams > Context::kMaxStreams)
      throw invalid(cat("ConnectOptions::streams = ", *options.streams));
    return *options.streams;
  }
  const char* text = std::getenv("CHORUS_STREAMS");
  if (!text) return Context::kDefaultStreams;
  const std::string_view value(text);
  int streams = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), streams);
  if (error != std::errc() || end != value.data() + value.size() || streams < 1 || streams > Context::kMaxStreams)
    throw invalid(cat("CHORUS_STREAMS='", value, "'"));
  return streams;
}

// What each rank publishes through the bootstrap: its stream count, then
// the transport's address. Seeing every rank's count before dialing anyone
// lets every rank fail at once on a disagreement; checked pair by pair, a
// rank that already failed would leave a third one dialing it until the timeout.
constexpr size_t kStreamsBytes = 4;

std::vector<std::byte> published(int streams, const std::vector<std::byte>& address) {
  std::vector<std::byte> blob(kStreamsBytes);
  for (size_t i = 0; i < kStreamsBytes; ++i)
    blob[i] = static_cast<std::byte>(static_cast<uint32_t>(streams) >> (8 * i));
  blob.insert(blob.end(), address.begin(), address.end());
  return blob;
}

int published_streams(const std::vector<std::byte>& blob, int rank, int peer) {
  if (blob.size() < kStreamsBytes)
    throw InvalidArgument(cat("rank ", rank, ": rank ", peer, " published ", blob.size(),
                              " bytes, not a chorus address"));
  uint32_t streams = 0;
  for (size_t i = 0; i < kStreamsBytes; ++i) streams |= static_cast<uint32_t>(blob[i]) << (8 * i);
  return static_cast<int>(streams);
}

}  // namespace

std::shared_ptr<Context> connect(Bootstrap& bootstrap, const ConnectOptions& options) {
  const int rank = bootstrap.rank();
  const int size = bootstrap.size();
  if (size < 1 || rank < 0 || rank >= size)
    throw InvalidArgument(cat("rank ", rank, " is out of range for a job of size ", size));
  const std::chrono::microseconds poll_time = poll_time_of(options, rank);
  const int streams = streams_of(options, rank);

  transport::tcp::TcpDeviceOptions device_options;
  device_options.rank = rank;
  device_options.size = size;
  device_options.interface = options.interface;
  device_options.hostname = options.hostname;
  device_options.describe_signature = algorithms::describe_signature;
  device_options.streams = streams;
  std::unique_ptr<transport::Device> device = transport::tcp::create_device(device_options);

  std::vector<std::vector<std::byte>> blobs = bootstrap.allgather(published(streams, device->address()));
  for (int peer = 0; peer < size; ++peer) {
    const int theirs = published_streams(blobs[static_cast<size_t>(peer)], rank, peer);
    if (theirs != streams)
      throw InvalidArgument(cat("rank ", rank, " uses ", streams, streams == 1 ? " stream" : " streams",
                                " per peer but rank ", peer, " uses ", theirs,
                                ": every rank must use the same ConnectOptions::streams / CHORUS_STREAMS"));
  }
  const Deadline deadline = Deadline::after(options.timeout);
  std::vector<std::vector<std::unique_ptr<transport::Pair>>> pairs(static_cast<size_t>(streams));
  for (auto& stream_pairs : pairs) stream_pairs.resize(static_cast<size_t>(size));
  // Every rank walks peers and streams in the same order; the transport
  // decides who dials and accepts in its progress thread, so this cannot deadlock.
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::vector<std::byte>& blob = blobs[static_cast<size_t>(peer)];
    const std::span<const std::byte> address(blob.data() + kStreamsBytes, blob.size() - kStreamsBytes);
    for (int stream = 0; stream < streams; ++stream)
      pairs[static_cast<size_t>(stream)][static_cast<size_t>(peer)] =
          device->connect(peer, address, deadline, stream);
  }
  // Nobody returns before every rank holds its whole mesh, so a failure to
  // connect shows up here on every rank rather than in the first collective.
  bootstrap.barrier();
  CHORUS_LOG(info, rank, "connected to ", size - 1, " peers, ", streams, streams == 1 ? " stream" : " streams",
             " each");
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
