// Stores in both directions between torch and chorus.
//
// TorchStore: the c10d::Store torch hands a backend (torchrun's TCPStore,
// under a prefix per process group) as a chorus::Store, so a group's chorus
// Context rendezvouses through it with a StoreBootstrap: one code path for
// every launcher torch knows.
//
// LauncherStore: the store of chorus's own launchers (CHORUS_STORE from
// chorus-run, a chorus-store, Redis, a shared directory) as a c10d::Store, so
// that torch's init_process_group has a store under chorus-run, where no
// MASTER_ADDR/MASTER_PORT is set (chorus/torch/__init__.py hands it over).
// Gloo works over it as well as chorus.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "adapters/torch/compat.h"
#include "rendezvous/store.h"

namespace chorus::torch_backend {

class TorchStore : public chorus::Store {
 public:
  // `rank` names this rank in errors.
  TorchStore(c10::intrusive_ptr<c10d::Store> store, int rank);
  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool remove(const std::string& key) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
};

class LauncherStore : public c10d::Store {
 public:
  // `keep_alive`: rank 0's embedded store server, where it hosts one.
  LauncherStore(std::shared_ptr<chorus::Store> store, std::shared_ptr<void> keep_alive,
                std::chrono::milliseconds timeout);
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
#if CHORUS_TORCH_STORE_HAS_CLONE
  // torch 2.x asks for a store of its own for helper threads: one more
  // handle on the same (thread-safe) chorus store.
  c10::intrusive_ptr<c10d::Store> clone() override;
#endif

 private:
  std::shared_ptr<chorus::Store> store_;
  std::shared_ptr<void> keep_alive_;
};

// What chorus-run (or any launcher chorus reads, see rendezvous/launch_env.h)
// told this process: its rank, the job's size and the job's store, opened as
// connect_from_env would open it (job id namespace, secret, TLS).
struct LaunchedStore {
  c10::intrusive_ptr<LauncherStore> store;
  int rank = 0;
  int size = 0;
};
LaunchedStore open_launcher_store(std::chrono::milliseconds timeout);

}  // namespace chorus::torch_backend
