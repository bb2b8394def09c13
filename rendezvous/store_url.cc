// Parsing CHORUS_STORE URLs and opening the store they name (see store_url.h).
#include "rendezvous/store_url.h"

#include <charconv>

#include "base/error.h"
#include "base/log.h"
#include "rendezvous/file_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/redis_store.h"
#include "rendezvous/tcp_store.h"

namespace chorus {
namespace {

constexpr std::string_view kForms = "tcp://host:port, file:///dir or redis://[:password@]host[:port][/db]";

int parse_number(std::string_view url, std::string_view what, std::string_view text, int low, int high) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    throw InvalidArgument(cat("store URL '", url, "': ", what, " '", text, "' is not a number"));
  if (value < low || value > high)
    throw InvalidArgument(cat("store URL '", url, "': ", what, " ", value, " is out of range [", low, ", ", high, "]"));
  return value;
}

// "host:port" or "[v6]:port"; without a port, default_port (0: a port is required).
void parse_host_port(std::string_view url, std::string_view text, int default_port, StoreUrl& parsed) {
  std::string_view host = text;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) throw InvalidArgument(cat("store URL '", url, "': unclosed '[' in the host"));
    host = text.substr(1, close - 1);
    std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw InvalidArgument(cat("store URL '", url, "': expected ':port' after ']'"));
      port = after.substr(1);
    }
  } else if (auto colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) throw InvalidArgument(cat("store URL '", url, "' has no host (expected ", kForms, ")"));
  parsed.host = std::string(host);
  if (port.empty()) {
    if (default_port == 0) throw InvalidArgument(cat("store URL '", url, "' has no port (expected ", kForms, ")"));
    parsed.port = static_cast<uint16_t>(default_port);
  } else {
    parsed.port = static_cast<uint16_t>(parse_number(url, "port", port, 1, 65535));
  }
}

void parse_redis(std::string_view url, std::string_view rest, StoreUrl& parsed) {
  // The password may hold '/' and ':', the host part never holds '@'.
  std::string_view host_part = rest;
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view user_info = rest.substr(0, at);
    if (user_info.empty() || user_info.front() != ':')
      throw InvalidArgument(cat("store URL '", url, "': only a password is supported (redis://:password@host:port)"));
    parsed.password = std::string(user_info.substr(1));
    host_part = rest.substr(at + 1);
  }
  auto slash = host_part.find('/');
  parse_host_port(url, host_part.substr(0, slash), 6379, parsed);
  if (slash != std::string_view::npos && slash + 1 < host_part.size())
    parsed.database = parse_number(url, "database", host_part.substr(slash + 1), 0, 1 << 20);
}

}  // namespace

StoreUrl parse_store_url(std::string_view url) {
  StoreUrl parsed;
  auto separator = url.find("://");
  if (separator == std::string_view::npos)
    throw InvalidArgument(cat("store URL '", url, "' is not a URL (expected ", kForms, ")"));
  parsed.scheme = std::string(url.substr(0, separator));
  std::string_view rest = url.substr(separator + 3);
  if (parsed.scheme == "file") {
    if (rest.empty()) throw InvalidArgument(cat("store URL '", url, "' names no directory"));
    parsed.path = std::string(rest);
  } else if (parsed.scheme == "tcp") {
    parse_host_port(url, rest, 0, parsed);
  } else if (parsed.scheme == "redis") {
    parse_redis(url, rest, parsed);
  } else {
    throw InvalidArgument(cat("store URL '", url, "': unknown scheme '", parsed.scheme, "' (expected ", kForms, ")"));
  }
  return parsed;
}

OpenedStore open_store(std::string_view url_text, int rank, std::string job_id, std::chrono::milliseconds timeout,
                       const JobSecret& secret, std::shared_ptr<const TlsContext> tls) {
  StoreUrl url = parse_store_url(url_text);
  OpenedStore opened;
  if ((url.scheme == "file" || url.scheme == "redis") && job_id.empty()) {
    throw InvalidArgument(cat("rank ", rank, ": store ", url.scheme, "://... needs a job id (CHORUS_JOB_ID), unique "
                              "per run, so a rerun never reads the previous run's keys"));
  }
  if (job_id.empty()) job_id = "default";
  const std::string job_namespace = "chorus/" + job_id;

  if (url.scheme == "file") {
    opened.store = std::make_shared<PrefixStore>(job_namespace, std::make_shared<FileStore>(url.path));
  } else if (url.scheme == "redis") {
#if CHORUS_HAVE_REDIS
    RedisStoreOptions options;
    options.host = url.host;
    options.port = url.port;
    options.database = url.database;
    options.password = url.password;
    options.key_namespace = job_namespace;
    options.connect_timeout = timeout;
    opened.store = std::make_shared<RedisStore>(options);
#else
    (void)timeout;
    throw InvalidArgument(cat("rank ", rank, ": store URL '", url_text, "': this libchorus was built without "
                              "hiredis (install libhiredis-dev and rebuild)"));
#endif
  } else {
    if (rank == 0) {
      try {
        TcpStoreServerOptions server_options;
        server_options.host = url.host;
        server_options.port = url.port;
        server_options.secret = secret;
        server_options.tls = tls;
        auto server = std::make_shared<TcpStoreServer>(server_options);
        CHORUS_LOG(info, rank, "hosting the rendezvous store on port ", server->port());
        opened.keep_alive = server;
      } catch (const IoError& error) {
        // Port taken: chorus-run or a standalone chorus-store serves it (the
        // usual case, so not worth a warning); the client's handshake tells
        // a store from any other program.
        CHORUS_LOG(debug, rank, "port ", url.port, " is taken (", error.what(), "): rank 0 joins the store there "
                   "instead of hosting one");
      }
    }
    opened.store =
        std::make_shared<PrefixStore>(job_namespace, std::make_shared<TcpStore>(url.host, url.port, timeout, secret, tls));
  }
  return opened;
}

}  // namespace chorus
