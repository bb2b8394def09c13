// The in-process store, for ranks that are threads of one process (tests).
#pragma once

#include <memory>

#include "rendezvous/store.h"

namespace chorus {

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

}  // namespace chorus
