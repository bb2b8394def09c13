// CHORUS_STORE URLs and the store each one opens: tcp://host:port (rank 0
// hosts a TcpStore), file:///dir (a shared directory) and
// redis://[:password@]host:port[/db] (an existing Redis server).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/job_secret.h"
#include "base/tls.h"
#include "rendezvous/store.h"

namespace chorus {

struct StoreUrl {
  std::string scheme;    // "tcp", "file" or "redis"
  std::string host;      // tcp, redis
  uint16_t port = 0;     // tcp, redis
  std::string path;      // file
  int database = 0;      // redis
  std::string password;  // redis
};

// InvalidArgument quoting the URL and the expected forms when it is malformed.
StoreUrl parse_store_url(std::string_view url);

struct OpenedStore {
  std::shared_ptr<Store> store;      // keys already under the job's namespace
  std::shared_ptr<void> keep_alive;  // rank 0's embedded TcpStoreServer with tcp://, else null
};

// Opens the store a job meets at. Files and Redis keys outlive the job, so
// file:// and redis:// need a job id unique per run (InvalidArgument
// otherwise), or a rerun would read the last run's addresses; tcp:// uses
// "default" without one. With tcp://, rank 0 hosts the server unless the port
// is taken (then a standalone chorus-store is assumed to serve it).
// rank 0's server listens on the URL's host only (tcp://127.0.0.1:... stays
// on loopback) and, like every client, proves `secret` on every connection.
OpenedStore open_store(std::string_view url, int rank, std::string job_id, std::chrono::milliseconds timeout,
                       const JobSecret& secret = {}, std::shared_ptr<const TlsContext> tls = nullptr);

}  // namespace chorus
