// The rendezvous store of a local launch, chosen by name ("tcp", "embedded",
// "file") or given as a URL; owns what it created (a TcpStore server, a
// temporary directory) and removes it when the job is over.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "rendezvous/store.h"
#include "rendezvous/tcp_store.h"

namespace chorus::tools {

class LaunchStore {
 public:
  // Throws InvalidArgument for an unknown choice, IoError when the store cannot be set up.
  // The store the launcher serves itself ("tcp") demands `secret` of every client.
  LaunchStore(const std::string& choice, const JobSecret& secret);
  ~LaunchStore();
  LaunchStore(const LaunchStore&) = delete;
  LaunchStore& operator=(const LaunchStore&) = delete;
  // What the ranks get as CHORUS_STORE.
  const std::string& url() const { return url_; }
  // Whether the store is still there once every rank has ended: not the
  // one rank 0 hosts ("embedded").
  bool outlives_ranks() const { return outlives_ranks_; }

 private:
  std::unique_ptr<TcpStoreServer> server_;
  std::filesystem::path temporary_directory_;
  std::string url_;
  bool outlives_ranks_ = true;
};

// Empty when `choice` is a store LaunchStore takes (tcp, embedded, file, or
// a URL of a form the ranks accept); else why not, for the flag's message.
std::string launch_store_problem(const std::string& choice);

}  // namespace chorus::tools
