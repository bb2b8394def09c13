// Everything rendezvous needs from the outside world: my rank, the size, an
// allgather of opaque blobs (transport addresses) and a barrier. A Store gives
// that with keys; MPI (a later adapter) gives it with MPI_Allgather.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rendezvous/store.h"

namespace chorus {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Returns every rank's blob, indexed by rank (mine included).
  virtual std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) = 0;
  virtual void barrier() = 0;
  // The store the ranks meet at, if they meet at one (null over MPI): where
  // the survivors of a failed job agree to carry on (chorus/shrink.h).
  virtual std::shared_ptr<Store> store() const { return nullptr; }
};

// Bootstrap over any Store. Writes O(1) keys per rank per round and reads them
// with one get_many. Rounds are numbered, so one StoreBootstrap can run many
// allgathers; give each job its own PrefixStore so reruns never see stale keys.
// Its first round fails every rank at once, naming the mistake, when two
// processes claim one rank or ranks disagree on the job size.
class StoreBootstrap : public Bootstrap {
 public:
  StoreBootstrap(std::shared_ptr<Store> store, int rank, int size, std::chrono::milliseconds timeout);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  void barrier() override;
  std::shared_ptr<Store> store() const override { return store_; }

 private:
  std::shared_ptr<Store> store_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  uint64_t round_ = 0;
  // Keys this rank wrote in the previous round; removed once the next round completes.
  std::vector<std::string> previous_round_keys_;
  void finish_round(std::vector<std::string> written);
  // Claims this rank's number and checks the job size against rank 0's
  // (store_bootstrap.cc says why); InvalidArgument naming the mistake.
  void join();
  // get_many, looking between slices whether a rank has failed the job.
  std::vector<std::vector<std::byte>> get_many_watching(const std::vector<std::string>& keys,
                                                        std::chrono::milliseconds timeout);
  void throw_if_job_failed();
  [[noreturn]] void fail_job(const std::string& why);
};

}  // namespace chorus
