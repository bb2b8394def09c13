// The TCP store: a small key-value server (rank 0 embeds one, or `chorus-store`
// runs it standalone) and its client.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "rendezvous/store.h"

namespace chorus {

// The server half of TcpStore: rank 0 embeds one, or `chorus-store` runs one
// standalone. Serves until destroyed.
class TcpStoreServer {
 public:
  // port 0 picks a free port. host "" listens on every address.
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
  TcpStore(const std::string& host, uint16_t port, std::chrono::milliseconds connect_timeout);
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
