// The Redis store (hiredis). Only built where hiredis is: chorus/features.h
// says whether this build has it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "rendezvous/store.h"

namespace chorus {

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

}  // namespace chorus
