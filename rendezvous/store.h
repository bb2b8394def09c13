// Key-value stores for rendezvous. A Store only has to carry a few small
// blobs per rank once, so the interface is the least that works everywhere:
// set, blocking get, wait, atomic add, remove. The stores themselves are
// declared next to their implementations (hash_store.h, file_store.h,
// tcp_store.h, prefix_store.h, redis_store.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

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

}  // namespace chorus
