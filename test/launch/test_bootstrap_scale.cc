// The rendezvous must scale: connecting N ranks writes O(1) keys per rank and
// reads the other ranks' addresses with one batched get_many, never N gets.
// A counting Store around a HashStore records every call each rank makes while
// running exactly what connect() runs on a StoreBootstrap (allgather, then barrier).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "rendezvous/bootstrap.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/store.h"

namespace {

struct CallCounts {
  std::atomic<int> set{0}, get{0}, get_many{0}, keys_read_by_get_many{0}, wait{0}, add{0}, remove{0};
};

class CountingStore : public chorus::Store {
 public:
  CountingStore(std::shared_ptr<chorus::Store> inner, CallCounts& counts) : inner_(std::move(inner)), counts_(counts) {}
  void set(const std::string& key, std::span<const std::byte> value) override {
    ++counts_.set;
    inner_->set(key, value);
  }
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override {
    ++counts_.get;
    return inner_->get(key, timeout);
  }
  std::vector<std::vector<std::byte>> get_many(const std::vector<std::string>& keys,
                                               std::chrono::milliseconds timeout) override {
    ++counts_.get_many;
    counts_.keys_read_by_get_many += static_cast<int>(keys.size());
    return inner_->get_many(keys, timeout);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    ++counts_.wait;
    inner_->wait(keys, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    ++counts_.add;
    return inner_->add(key, delta);
  }
  bool remove(const std::string& key) override {
    ++counts_.remove;
    return inner_->remove(key);
  }

 private:
  std::shared_ptr<chorus::Store> inner_;
  CallCounts& counts_;
};

}  // namespace

TEST_CASE("bootstrap of a connect: O(1) writes per rank, one batched read", "[launch][scale]") {
  for (int size : {2, 16, 64}) {
    auto shared = std::make_shared<chorus::HashStore>();
    std::vector<CallCounts> counts(static_cast<size_t>(size));
    std::vector<std::thread> ranks;
    std::atomic<int> wrong_blobs{0};
    for (int rank = 0; rank < size; ++rank) {
      ranks.emplace_back([&, rank] {
        auto store = std::make_shared<CountingStore>(shared, counts[static_cast<size_t>(rank)]);
        chorus::StoreBootstrap bootstrap(store, rank, size, std::chrono::seconds(20));
        std::vector<std::byte> address(32, static_cast<std::byte>(rank));
        auto blobs = bootstrap.allgather(address);
        for (int peer = 0; peer < size; ++peer)
          if (blobs[static_cast<size_t>(peer)] != std::vector<std::byte>(32, static_cast<std::byte>(peer))) ++wrong_blobs;
        bootstrap.barrier();
      });
    }
    for (auto& thread : ranks) thread.join();
    CHECK(wrong_blobs == 0);
    int barrier_releases = 0;
    for (int rank = 0; rank < size; ++rank) {
      const CallCounts& c = counts[static_cast<size_t>(rank)];
      INFO("size " << size << ", rank " << rank);
      // Joining: a claim (add) and who claimed (set); rank 0 sets the job
      // size, the others read it. Then the allgather key, the barrier's
      // arrival key, and its done key for the last to arrive.
      const int fixed_sets = rank == 0 ? 4 : 3;
      CHECK(c.set >= fixed_sets);
      CHECK(c.set <= fixed_sets + 1);
      barrier_releases += c.set - fixed_sets;
      CHECK(c.add == 2);
      CHECK(c.wait == 0);
      // Reads: the allgather's one batch, the barrier's done key, rank 0's
      // size; a wait that runs past a 200 ms slice looks once at the job's
      // error key (a get) and goes on, so slices and gets come in pairs.
      CHECK(c.get_many - c.get == (rank == 0 ? 2 : 3));
      CHECK(c.get <= 100);
      CHECK(c.keys_read_by_get_many >= size + (rank == 0 ? 1 : 2));
    }
    CHECK(barrier_releases == 1);
  }
}
