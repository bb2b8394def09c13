// Key-value stores for rendezvous. A Store only has to carry a few small
// blobs per rank once, so the interface is the least that works everywhere:
// set, blocking get, wait, atomic add, remove.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chorus/config.h"

namespace chorus {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, std::span<const std::byte> value) = 0;
  // Waits until the key exists (TimeoutError naming the key otherwise).
  virtual std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // One round trip where the store can batch; the default loops over get().
  virtual std::vector<std::vector<std::byte>> get_many(const std::vector<std::string>& keys,
                                                       std::chrono::milliseconds timeout);
  // Waits until every key exists; TimeoutError names the missing ones.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Atomically adds delta to the integer stored at key (0 if absent); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Returns whether the key existed.
  virtual bool remove(const std::string& key) = 0;
};

// In-process store: ranks as threads of one process.
class HashStore : public Store {
 public:
  HashStore();
  ~HashStore() override;
  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool remove(const std::string& key) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A directory on a filesystem every rank sees. Writes are atomic (write a
// temporary, then rename), so a reader never sees half a value.
class FileStore : public Store {
 public:
  explicit FileStore(std::filesystem::path directory);
  ~FileStore() override;
  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool remove(const std::string& key) override;

 private:
  std::filesystem::path directory_;
};

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

// Puts every key of an inner store under "prefix/" (job ids, sub-groups).
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner);
  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::vector<std::vector<std::byte>> get_many(const std::vector<std::string>& keys,
                                               std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool remove(const std::string& key) override;

 private:
  std::string prefixed(const std::string& key) const;
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

#if CHORUS_HAVE_REDIS
struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  int database = 0;        // SELECTed after every (re)connect
  std::string password;    // AUTH when not empty
  // Required: every key becomes "<key_namespace>/<key>", so jobs sharing one
  // Redis never read each other's keys. Use the job id.
  std::string key_namespace;
  // Every key written gets this expiry, so a finished or crashed job leaves
  // nothing behind; a job's rendezvous never takes this long. 0: no expiry.
  std::chrono::milliseconds key_ttl = std::chrono::hours(1);
  std::chrono::milliseconds connect_timeout{10000};
  // Longest wait for one reply before TimeoutError (a hung, not dead, server).
  std::chrono::milliseconds reply_timeout{10000};
};

// A Redis server that every rank reaches (hiredis). Blocking get/wait poll
// with a 1 to 20 ms backoff; get_many is one MGET. A dropped connection is
// reconnected once per call; IoError names host:port and the hiredis error.
class RedisStore : public Store {
 public:
  explicit RedisStore(RedisStoreOptions options);
  ~RedisStore() override;
  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::vector<std::vector<std::byte>> get_many(const std::vector<std::string>& keys,
                                               std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool remove(const std::string& key) override;
  // Deletes every key under the namespace, whoever wrote it; returns how many.
  // Call once every rank is done with the store (e.g. after the job's last barrier).
  size_t remove_namespace();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
#endif  // CHORUS_HAVE_REDIS

}  // namespace chorus
