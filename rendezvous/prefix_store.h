// A prefix over any store: keeps jobs and sub-groups sharing one store apart.
#pragma once

#include <memory>
#include <string>

#include "rendezvous/store.h"

namespace chorus {

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

}  // namespace chorus
