// StoreBootstrap: allgather and barrier with ranks as threads (HashStore,
// TcpStore) and as forked processes (FileStore, TcpStore), argument checks,
// timeouts that name the absent ranks, and cleanup of old rounds.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "base/error.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/file_store.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous_test_helpers.h"

using namespace std::chrono_literals;
using chorus::test::rank_blob;

namespace {

constexpr int kRounds = 3;

// One rank's whole job; throws on any wrong byte.
void run_rank(std::shared_ptr<chorus::Store> store, int rank, int size) {
  chorus::StoreBootstrap bootstrap(std::move(store), rank, size, 10s);
  for (int round = 0; round < kRounds; ++round) {
    auto blobs = bootstrap.allgather(rank_blob(rank, round));
    chorus::test::child_check(blobs.size() == static_cast<size_t>(size), "one blob per rank");
    for (int r = 0; r < size; ++r) {
      chorus::test::child_check(blobs[r] == rank_blob(r, round),
                                "rank " + std::to_string(rank) + " got the wrong blob of rank " + std::to_string(r));
    }
    bootstrap.barrier();
  }
}

// Runs `size` ranks as threads; each gets its store from make_store(rank).
template <class MakeStore>
void run_threads(int size, MakeStore make_store) {
  std::vector<std::thread> threads;
  std::vector<std::string> failures(size);
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        std::shared_ptr<chorus::Store> store = make_store(rank);
        run_rank(store, rank, size);
      } catch (const std::exception& error) {
        failures[rank] = error.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < size; ++rank) {
    INFO("rank " << rank << " of " << size);
    REQUIRE(failures[rank].empty());
  }
}

}  // namespace

TEST_CASE("StoreBootstrap validates rank, size, store and timeout", "[bootstrap]") {
  auto store = std::make_shared<chorus::HashStore>();
  REQUIRE_THROWS_WITH(chorus::StoreBootstrap(store, 5, 4, 1s), "rank 5 out of range for size 4");
  REQUIRE_THROWS_AS(chorus::StoreBootstrap(store, -1, 4, 1s), chorus::InvalidArgument);
  REQUIRE_THROWS_AS(chorus::StoreBootstrap(store, 0, 0, 1s), chorus::InvalidArgument);
  REQUIRE_THROWS_AS(chorus::StoreBootstrap(nullptr, 0, 1, 1s), chorus::InvalidArgument);
  REQUIRE_THROWS_AS(chorus::StoreBootstrap(store, 0, 1, 0ms), chorus::InvalidArgument);
  chorus::StoreBootstrap ok(store, 3, 4, 1s);
  REQUIRE(ok.rank() == 3);
  REQUIRE(ok.size() == 4);
}

TEST_CASE("StoreBootstrap over HashStore with ranks as threads, sizes 1 to 8", "[bootstrap]") {
  for (int size = 1; size <= 8; ++size) {
    auto shared = std::make_shared<chorus::HashStore>();
    run_threads(size, [&](int) { return std::make_shared<chorus::PrefixStore>("job", shared); });
  }
}

TEST_CASE("StoreBootstrap over TcpStore with ranks as threads, sizes 1 to 8", "[bootstrap]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  for (int size = 1; size <= 8; ++size) {
    std::string job = "job-" + std::to_string(size);
    run_threads(size, [&](int) {
      auto client = std::make_shared<chorus::TcpStore>("127.0.0.1", server.port(), 5s);
      return std::make_shared<chorus::PrefixStore>(job, client);
    });
  }
}

TEST_CASE("StoreBootstrap barrier holds every rank until the last arrives", "[bootstrap]") {
  auto store = std::make_shared<chorus::HashStore>();
  std::atomic<bool> late_rank_arrived{false};
  std::atomic<int> released_early{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      chorus::StoreBootstrap bootstrap(store, rank, 4, 5s);
      if (rank == 2) {
        std::this_thread::sleep_for(150ms);
        late_rank_arrived = true;
      }
      bootstrap.barrier();
      if (!late_rank_arrived) ++released_early;
    });
  }
  for (auto& thread : threads) thread.join();
  REQUIRE(released_early == 0);
}

TEST_CASE("StoreBootstrap removes a round's keys once the next round completes", "[bootstrap]") {
  auto store = std::make_shared<chorus::HashStore>();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      chorus::StoreBootstrap bootstrap(store, rank, 3, 5s);
      bootstrap.allgather(rank_blob(rank, 0));  // round 0
      bootstrap.barrier();                      // round 1
      bootstrap.allgather(rank_blob(rank, 2));  // round 2
      bootstrap.barrier();                      // round 3
    });
  }
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < 3; ++rank) {
    REQUIRE_THROWS_AS(store->wait({"allgather/0/" + std::to_string(rank)}, 0ms), chorus::TimeoutError);
    REQUIRE_THROWS_AS(store->wait({"barrier/1/" + std::to_string(rank)}, 0ms), chorus::TimeoutError);
    REQUIRE_THROWS_AS(store->wait({"allgather/2/" + std::to_string(rank)}, 0ms), chorus::TimeoutError);
    store->wait({"barrier/3/" + std::to_string(rank)}, 0ms);  // the last round is still there
  }
  REQUIRE_THROWS_AS(store->wait({"barrier/1"}, 0ms), chorus::TimeoutError);
  REQUIRE_THROWS_AS(store->wait({"barrier/1/done"}, 0ms), chorus::TimeoutError);
}

TEST_CASE("StoreBootstrap timeouts name the ranks that never joined", "[bootstrap]") {
  auto run_two_of_four = [](std::shared_ptr<chorus::Store> store, bool barrier) {
    std::vector<std::string> messages(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        chorus::StoreBootstrap bootstrap(store, rank, 4, 200ms);
        try {
          if (barrier) {
            bootstrap.barrier();
          } else {
            bootstrap.allgather(rank_blob(rank, 0));
          }
        } catch (const chorus::TimeoutError& error) {
          messages[rank] = error.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
    return messages;
  };
  SECTION("allgather over HashStore") {
    auto messages = run_two_of_four(std::make_shared<chorus::HashStore>(), false);
    REQUIRE(messages[0] == "rank 0: timed out after 200 ms waiting for ranks 2, 3 to join allgather round 0");
    REQUIRE(messages[1] == "rank 1: timed out after 200 ms waiting for ranks 2, 3 to join allgather round 0");
  }
  SECTION("barrier over TcpStore") {
    chorus::TcpStoreServer server("127.0.0.1", 0);
    auto store = std::make_shared<chorus::TcpStore>("127.0.0.1", server.port(), 2s);
    auto messages = run_two_of_four(store, true);
    REQUIRE(messages[0] == "rank 0: timed out after 200 ms waiting for ranks 2, 3 to join barrier round 0");
  }
  SECTION("allgather over FileStore with one rank missing") {
    chorus::test::TemporaryDirectory directory;
    auto store = std::make_shared<chorus::FileStore>(directory.path());
    std::vector<std::thread> threads;
    std::vector<std::string> messages(3);
    for (int rank = 0; rank < 3; ++rank) {
      threads.emplace_back([&, rank] {
        try {
          chorus::StoreBootstrap(store, rank, 4, 200ms).allgather(rank_blob(rank, 0));
        } catch (const chorus::TimeoutError& error) {
          messages[rank] = error.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
    REQUIRE(messages[2] == "rank 2: timed out after 200 ms waiting for rank 3 to join allgather round 0");
  }
}

TEST_CASE("StoreBootstrap with ranks as processes over FileStore", "[bootstrap][process]") {
  chorus::test::TemporaryDirectory directory;
  for (int size : {1, 3, 6}) {
    auto job = directory.path() / ("job-" + std::to_string(size));
    std::vector<pid_t> children;
    for (int rank = 0; rank < size; ++rank) {
      children.push_back(chorus::test::fork_child([&] {
        auto store = std::make_shared<chorus::FileStore>(job);
        run_rank(store, rank, size);
      }));
    }
    for (pid_t child : children) REQUIRE(chorus::test::wait_child(child) == 0);
  }
}

TEST_CASE("StoreBootstrap with ranks as processes over TcpStore (server in rank 0)", "[bootstrap][process]") {
  for (int size : {2, 5, 8}) {
    // Rank 0 hosts the server, as connect_from_env does; the others may connect first.
    uint16_t port = chorus::TcpStoreServer("127.0.0.1", 0).port();
    std::vector<pid_t> children;
    for (int rank = 0; rank < size; ++rank) {
      children.push_back(chorus::test::fork_child([&] {
        std::unique_ptr<chorus::TcpStoreServer> server;
        if (rank == 0) server = std::make_unique<chorus::TcpStoreServer>("127.0.0.1", port);
        auto store = std::make_shared<chorus::TcpStore>("127.0.0.1", port, 10s);
        run_rank(store, rank, size);
        // Rank 0 keeps serving until every other rank is done with the store.
        if (rank != 0 && store->add("finished", 1) == size - 1) store->set("all-finished", {});
        if (rank == 0 && size > 1) store->wait({"all-finished"}, 10s);
      }));
    }
    for (pid_t child : children) REQUIRE(chorus::test::wait_child(child) == 0);
  }
}
