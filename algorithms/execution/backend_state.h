// What a backend (an algorithm that is not a Plan, algorithms/selection/registry.h)
// keeps per Communicator: NCCL's communicators, say, which cost a bootstrap
// to make and must then serve every later call of the same group.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace chorus::algorithms {

class BackendState {
 public:
  virtual ~BackendState() = default;
};

class BackendStates {
 public:
  // The state of `backend`, made by `make` on its first call. The lock is
  // held while `make` runs (it may run collectives of its own), so a racing
  // caller waits for that one rather than bootstrapping twice; a `make`
  // that throws leaves nothing behind, and the next call tries again.
  BackendState& get_or_make(std::string_view backend, const std::function<std::unique_ptr<BackendState>()>& make) {
    std::lock_guard lock(mutex_);
    auto found = states_.find(backend);
    if (found == states_.end()) found = states_.emplace(std::string(backend), make()).first;
    return *found->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<BackendState>, std::less<>> states_;
};

}  // namespace chorus::algorithms
