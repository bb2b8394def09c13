// The shared-directory store: every rank sees the same filesystem.
#pragma once

#include <filesystem>

#include "rendezvous/store.h"

namespace chorus {

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
  void refuse_foreign_directory() const;
  std::filesystem::path directory_;
};

}  // namespace chorus
