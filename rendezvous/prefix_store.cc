// PrefixStore: a namespace ("job-7/") inside another store, so reruns and
// sub-groups never read each other's keys. Batches stay batches: get_many
// forwards to the inner store's get_many (one round trip on a TcpStore).
#include "rendezvous/prefix_store.h"

#include "base/error.h"

namespace chorus {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
    : prefix_(std::move(prefix)), inner_(std::move(inner)) {
  if (!inner_) throw InvalidArgument("PrefixStore '" + prefix_ + "': the inner store is null");
}

std::string PrefixStore::prefixed(const std::string& key) const { return prefix_ + "/" + key; }

void PrefixStore::set(const std::string& key, std::span<const std::byte> value) {
  inner_->set(prefixed(key), value);
}

std::vector<std::byte> PrefixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return inner_->get(prefixed(key), timeout);
}

std::vector<std::vector<std::byte>> PrefixStore::get_many(const std::vector<std::string>& keys,
                                                          std::chrono::milliseconds timeout) {
  std::vector<std::string> inner_keys;
  inner_keys.reserve(keys.size());
  for (const auto& key : keys) inner_keys.push_back(prefixed(key));
  return inner_->get_many(inner_keys, timeout);
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> inner_keys;
  inner_keys.reserve(keys.size());
  for (const auto& key : keys) inner_keys.push_back(prefixed(key));
  inner_->wait(inner_keys, timeout);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) { return inner_->add(prefixed(key), delta); }

bool PrefixStore::remove(const std::string& key) { return inner_->remove(prefixed(key)); }

}  // namespace chorus
