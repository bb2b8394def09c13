// The TCP store: a small key-value server (rank 0 embeds one, or `chorus-store`
// runs it standalone) and its client.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/job_secret.h"
#include "base/tls.h"
#include "rendezvous/store.h"

namespace chorus {

struct TcpStoreServerOptions {
  // The address to listen on ("" every address; "127.0.0.1" loopback only).
  std::string host;
  uint16_t port = 0;  // 0 picks a free port
  // Every client proves it before its first request (tcp_store_protocol.h).
  JobSecret secret;
  // TLS on every connection once it proved the secret (base/tls.h); null: none.
  std::shared_ptr<const TlsContext> tls;
  // Bytes of keys and values the server holds at most; a set or add past it
  // is refused with an error naming the limit.
  size_t max_stored_bytes = size_t{1} << 30;
};

// The server half of TcpStore: rank 0 embeds one, or `chorus-store` runs one
// standalone. Serves until destroyed.
class TcpStoreServer {
 public:
  explicit TcpStoreServer(const TcpStoreServerOptions& options);
  // port 0 picks a free port. host "" listens on every address. No secret.
  explicit TcpStoreServer(const std::string& host = "", uint16_t port = 0);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Client of a TcpStoreServer. Reconnects (within the timeout) when the
// connection drops; IoError/TimeoutError name the server address.
class TcpStore : public Store {
 public:
  // Every connection proves `secret` to the server, and the server proves
  // it back, before the first request; with `tls`, a TLS handshake follows
  // and the requests travel inside it.
  TcpStore(const std::string& host, uint16_t port, std::chrono::milliseconds connect_timeout,
           JobSecret secret = {}, std::shared_ptr<const TlsContext> tls = nullptr);
  ~TcpStore() override;
  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::vector<std::vector<std::byte>> get_many(const std::vector<std::string>& keys,
                                               std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool remove(const std::string& key) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus
