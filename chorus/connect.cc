// Building Contexts: from any Bootstrap, and from the environment contract
// (CHORUS_RANK, CHORUS_SIZE, CHORUS_STORE, CHORUS_JOB_ID).
#include "chorus/connect.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "algorithms/call.h"
#include "chorus/error.h"
#include "chorus/log.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"

namespace chorus {

std::shared_ptr<Context> connect(Bootstrap& bootstrap, const ConnectOptions& options) {
  const int rank = bootstrap.rank();
  const int size = bootstrap.size();
  if (size < 1 || rank < 0 || rank >= size)
    throw InvalidArgument(cat("rank ", rank, " is out of range for a job of size ", size));

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
  return std::make_shared<Context>(rank, size, std::move(device), std::move(pairs), options.timeout);
}

namespace {

std::string_view env(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string_view(value) : std::string_view();
}

int parse_int_variable(const char* name, std::string_view text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw InvalidArgument(cat(name, "='", text, "' is not an integer"));
  return value;
}

struct StoreUrl {
  std::string scheme;  // "tcp" or "file"
  std::string host;
  uint16_t port = 0;
  std::string path;
};

StoreUrl parse_store_url(std::string_view url) {
  StoreUrl parsed;
  auto separator = url.find("://");
  if (separator == std::string_view::npos)
    throw InvalidArgument(cat("CHORUS_STORE='", url, "' is not a URL (expected tcp://host:port or file:///dir)"));
  parsed.scheme = std::string(url.substr(0, separator));
  std::string_view rest = url.substr(separator + 3);
  if (parsed.scheme == "file") {
    if (rest.empty()) throw InvalidArgument(cat("CHORUS_STORE='", url, "' names no directory"));
    parsed.path = std::string(rest);
    return parsed;
  }
  if (parsed.scheme != "tcp")
    throw InvalidArgument(cat("CHORUS_STORE='", url, "': unknown scheme '", parsed.scheme,
                              "' (expected tcp://host:port or file:///dir)"));
  // host:port, with IPv6 literals in brackets: tcp://[::1]:29500
  auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == rest.size())
    throw InvalidArgument(cat("CHORUS_STORE='", url, "' has no port (expected tcp://host:port)"));
  std::string_view host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) throw InvalidArgument(cat("CHORUS_STORE='", url, "' has no host"));
  int port = parse_int_variable("CHORUS_STORE port", rest.substr(colon + 1));
  if (port <= 0 || port > 65535) throw InvalidArgument(cat("CHORUS_STORE='", url, "': port out of range"));
  parsed.host = std::string(host);
  parsed.port = static_cast<uint16_t>(port);
  return parsed;
}

}  // namespace

std::shared_ptr<Context> connect_from_env(const ConnectOptions& options) {
  std::string_view rank_text = env("CHORUS_RANK");
  std::string_view size_text = env("CHORUS_SIZE");
  std::string_view store_text = env("CHORUS_STORE");
  if (rank_text.empty() || size_text.empty() || store_text.empty()) {
    std::string missing;
    for (auto [name, value] : {std::pair{"CHORUS_RANK", rank_text}, std::pair{"CHORUS_SIZE", size_text},
                               std::pair{"CHORUS_STORE", store_text}}) {
      if (value.empty()) missing += (missing.empty() ? "" : ", ") + std::string(name);
    }
    throw InvalidArgument(cat("connect_from_env: ", missing,
                              " not set (a launcher sets CHORUS_RANK, CHORUS_SIZE and CHORUS_STORE=tcp://host:port "
                              "or file:///dir; see the README)"));
  }
  const int rank = parse_int_variable("CHORUS_RANK", rank_text);
  const int size = parse_int_variable("CHORUS_SIZE", size_text);
  if (size < 1 || rank < 0 || rank >= size)
    throw InvalidArgument(cat("CHORUS_RANK=", rank, " is out of range for CHORUS_SIZE=", size));
  StoreUrl url = parse_store_url(store_text);
  std::string job_id(env("CHORUS_JOB_ID"));

  std::shared_ptr<Store> store;
  std::shared_ptr<TcpStoreServer> embedded_server;
  if (url.scheme == "file") {
    // Files outlive the job: without a job id a rerun would read the last
    // run's addresses and dial dead ports.
    if (job_id.empty())
      throw InvalidArgument(cat("rank ", rank, ": CHORUS_STORE=file://... needs CHORUS_JOB_ID, unique per run, so a "
                                "rerun never reads the previous run's keys"));
    store = std::make_shared<FileStore>(url.path);
  } else {
    if (rank == 0) {
      try {
        embedded_server = std::make_shared<TcpStoreServer>("", url.port);
        CHORUS_LOG(info, rank, "hosting the rendezvous store on port ", embedded_server->port());
      } catch (const IoError& error) {
        // Port taken: a standalone chorus-store may be serving it; the client
        // handshake below tells a store from any other program.
        CHORUS_LOG(info, rank, "not hosting the store (", error.what(), "); using the one at ", url.host, ":",
                   url.port);
      }
    }
    store = std::make_shared<TcpStore>(url.host, url.port, options.timeout);
  }
  if (job_id.empty()) job_id = "default";
  auto job_store = std::make_shared<PrefixStore>("chorus/" + job_id, store);
  StoreBootstrap bootstrap(job_store, rank, size, options.timeout);
  std::shared_ptr<Context> context = connect(bootstrap, options);
  if (embedded_server) context->keep_alive(embedded_server);
  return context;
}

}  // namespace chorus
