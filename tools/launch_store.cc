#include "tools/launch_store.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "rendezvous/store_url.h"
#include "rendezvous/tcp_store.h"

namespace chorus::tools {
namespace {

// Rank 0 binds this port a moment later. Another program could take it in
// between; rank 0 then reports that it found no chorus store there, which is
// clear enough for a local launch (use "tcp" to avoid the window altogether).
uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw IoError(cat("cannot create a socket to find a free port: ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    int error = errno;
    ::close(fd);
    throw IoError(cat("cannot find a free port on 127.0.0.1: ", std::strerror(error)));
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

std::filesystem::path make_temporary_directory() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = cat(base && *base ? base : "/tmp", "/chorus-store-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr)
    throw IoError(cat("cannot create a store directory from ", pattern, ": ", std::strerror(errno)));
  return pattern;
}

}  // namespace

LaunchStore::LaunchStore(const std::string& choice, const JobSecret& secret) {
  if (choice == "tcp") {
    TcpStoreServerOptions options;
    options.host = "127.0.0.1";
    options.secret = secret;
    // The ranks inherit CHORUS_TLS_*: the store they reach must speak as they do.
    options.tls = tls_from_environment();
    server_ = std::make_unique<TcpStoreServer>(options);
    url_ = cat("tcp://127.0.0.1:", server_->port());
  } else if (choice == "embedded") {
    url_ = cat("tcp://127.0.0.1:", free_loopback_port());
    outlives_ranks_ = false;
  } else if (choice == "file") {
    temporary_directory_ = make_temporary_directory();
    url_ = "file://" + temporary_directory_.string();
  } else if (choice.find("://") != std::string::npos) {
    url_ = choice;  // connect_from_env checks the scheme, on every rank, with the rank in the message
  } else {
    throw InvalidArgument(cat("unknown store '", choice,
                              "' (expected tcp, embedded, file, or a URL such as redis://host:port)"));
  }
}

LaunchStore::~LaunchStore() {
  if (!temporary_directory_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(temporary_directory_, ignored);
  }
}

std::string launch_store_problem(const std::string& choice) {
  if (choice == "tcp" || choice == "embedded" || choice == "file") return std::string();
  if (choice.find("://") == std::string::npos)
    return cat("'", choice, "' is not tcp, embedded, file or a URL such as redis://host:port");
  try {
    (void)parse_store_url(choice);
  } catch (const Error& error) {
    return error.what();
  }
  return std::string();
}

}  // namespace chorus::tools
