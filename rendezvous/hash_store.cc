// HashStore: an in-process Store for ranks that are threads of one process
// (tests, single-process jobs). One mutex guards the map; one condition
// variable wakes every waiter on any change, which is plenty for a handful of
// rendezvous keys.
#include "rendezvous/hash_store.h"

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "rendezvous/store_common.h"

namespace chorus {

struct HashStore::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::unordered_map<std::string, std::vector<std::byte>> values;

  // Waits (mutex held through `lock`) until every key exists; returns the missing ones on timeout.
  std::vector<std::string> wait_for(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                                    Deadline deadline) {
    auto all_present = [&] {
      for (const auto& key : keys)
        if (values.find(key) == values.end()) return false;
      return true;
    };
    if (deadline.at() == Clock::time_point::max()) {
      changed.wait(lock, all_present);
    } else if (!changed.wait_until(lock, deadline.at(), all_present)) {
      std::vector<std::string> missing;
      for (const auto& key : keys)
        if (values.find(key) == values.end()) missing.push_back(key);
      return missing;
    }
    return {};
  }
};

HashStore::HashStore() : state_(std::make_unique<State>()) {}
HashStore::~HashStore() = default;

void HashStore::set(const std::string& key, std::span<const std::byte> value) {
  {
    std::lock_guard lock(state_->mutex);
    state_->values[key].assign(value.begin(), value.end());
  }
  state_->changed.notify_all();
}

std::vector<std::byte> HashStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mutex);
  auto missing = state_->wait_for(lock, {key}, store_detail::deadline_after(timeout));
  if (!missing.empty()) store_detail::throw_key_timeout("HashStore", missing, timeout);
  return state_->values.at(key);
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mutex);
  auto missing = state_->wait_for(lock, keys, store_detail::deadline_after(timeout));
  if (!missing.empty()) store_detail::throw_key_timeout("HashStore", missing, timeout);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t sum = 0;
  {
    std::lock_guard lock(state_->mutex);
    auto found = state_->values.find(key);
    sum = store_detail::add_to_counter("HashStore", key,
                                       found == state_->values.end() ? nullptr : &found->second, delta);
    state_->values[key] = store_detail::format_counter(sum);
  }
  state_->changed.notify_all();
  return sum;
}

bool HashStore::remove(const std::string& key) {
  std::lock_guard lock(state_->mutex);
  return state_->values.erase(key) > 0;
}

}  // namespace chorus
