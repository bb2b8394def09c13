// Subgroups and topology through the public API, with one thread per rank:
// Context::split (MPI_Comm_split semantics) at 2-8 ranks, nested splits,
// collectives on parents and children interleaved, children outliving their
// siblings and their parent; hosts faked with ConnectOptions::host_id, with
// shared memory within a host and TCP across. Values are small integers, so
// every check is bit-exact equality.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/log.h"
#include "test/integration/rank_threads.h"

using namespace chorus;
using namespace chorus::testing;
using namespace std::chrono_literals;

namespace {

// The sum over `members` of each member's value (value(r) = r + 1 + i).
std::vector<float> expected_sum(const std::vector<int>& members, size_t count) {
  std::vector<float> sum(count, 0.0f);
  for (int member : members)
    for (size_t i = 0; i < count; ++i) sum[i] += static_cast<float>(member + 1 + static_cast<int>(i % 7));
  return sum;
}

std::vector<float> own_values(int rank, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
  return values;
}

// Catch2's assertions are not thread-safe: the rank threads check with
// these, which throw; run_ranks hands the first failure to the main thread.
void expect(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error(what);
}

void require_equal(const std::vector<float>& got, const std::vector<float>& expected, const std::string& what) {
  expect(got.size() == expected.size(), cat(what, ": ", got.size(), " elements, expected ", expected.size()));
  for (size_t i = 0; i < got.size(); ++i)
    expect(got[i] == expected[i], cat(what, ": element ", i, " is ", got[i], ", expected ", expected[i]));
}

}  // namespace

TEST_CASE("split groups ranks by color and orders them by key", "[split]") {
  for (int size = 2; size <= 8; ++size) {
    INFO(size << " ranks");
    require_all_ok(run_ranks(size, [&](Context& world) {
      const int rank = world.rank();
      // Reverse order by key: the highest world rank becomes rank 0.
      std::shared_ptr<Context> child = world.split(rank % 2, -rank);
      expect(child != nullptr, "a colored rank got no child");
      std::vector<int> members;
      for (int r = size - 1; r >= 0; --r)
        if (r % 2 == rank % 2) members.push_back(r);
      expect(child->size() == static_cast<int>(members.size()), cat("child size ", child->size()));
      expect(members[static_cast<size_t>(child->rank())] == rank, cat("rank ", rank, " is child rank ", child->rank()));

      for (size_t count : {size_t{1}, size_t{1000}, size_t{300001}}) {
        std::vector<float> data = own_values(rank, count);
        allreduce(*child, std::span(data), ReduceOp::sum);
        require_equal(data, expected_sum(members, count), "child allreduce");
      }
      // Broadcast from child rank 0 (the member with the highest world rank).
      std::vector<int32_t> config(17, rank == members[0] ? 42 : -1);
      broadcast(*child, std::span(config), 0);
      expect(std::all_of(config.begin(), config.end(), [](int32_t v) { return v == 42; }), "child broadcast");
      // The parent still works, and knows nothing of the child's numbering.
      std::vector<float> everyone = own_values(rank, 64);
      std::vector<int> all(static_cast<size_t>(size));
      std::iota(all.begin(), all.end(), 0);
      allreduce(world, std::span(everyone), ReduceOp::sum);
      require_equal(everyone, expected_sum(all, 64), "parent allreduce after the split");
    }));
  }
}

TEST_CASE("nested splits, and parent and child collectives interleaved", "[split]") {
  const int size = 8;
  require_all_ok(run_ranks(size, [&](Context& world) {
    const int rank = world.rank();
    std::shared_ptr<Context> half = world.split(rank / 4, rank);      // {0-3}, {4-7}
    std::shared_ptr<Context> pair = half->split(half->rank() / 2, 0);  // {0,1}, {2,3}, ...
    expect(half->size() == 4 && pair->size() == 2, cat("sizes ", half->size(), " and ", pair->size()));
    const int half_base = rank / 4 * 4;
    const int pair_base = rank / 2 * 2;
    std::vector<int> half_members{half_base, half_base + 1, half_base + 2, half_base + 3};
    std::vector<int> pair_members{pair_base, pair_base + 1};
    std::vector<int> all(size);
    std::iota(all.begin(), all.end(), 0);

    for (int round = 0; round < 3; ++round) {
      // Blocking calls on three Contexts in one order on every rank...
      std::vector<float> a = own_values(rank, 513), b = own_values(rank, 4099), c = own_values(rank, 77);
      allreduce(*pair, std::span(c), ReduceOp::sum);
      allreduce(world, std::span(a), ReduceOp::sum);
      allreduce(*half, std::span(b), ReduceOp::sum);
      require_equal(a, expected_sum(all, 513), "world");
      require_equal(b, expected_sum(half_members, 4099), "half");
      require_equal(c, expected_sum(pair_members, 77), "pair");
      // ...and async ones in flight on all three at once, waited in another order.
      std::vector<float> x = own_values(rank, 100000), y = own_values(rank, 100001), z = own_values(rank, 3);
      Work on_half = allreduce_async(*half, x.data(), x.data(), x.size(), DataType::float32, ReduceOp::sum);
      Work on_world = allreduce_async(world, y.data(), y.data(), y.size(), DataType::float32, ReduceOp::sum);
      Work on_pair = allreduce_async(*pair, z.data(), z.data(), z.size(), DataType::float32, ReduceOp::sum);
      on_pair.wait();
      on_world.wait();
      on_half.wait();
      require_equal(x, expected_sum(half_members, 100000), "async half");
      require_equal(y, expected_sum(all, 100001), "async world");
      require_equal(z, expected_sum(pair_members, 3), "async pair");
    }
  }));
}

TEST_CASE("a child outlives its siblings and its parent", "[split]") {
  const int size = 6;
  std::barrier<> all_threads(size);
  require_all_ok(run_ranks(size, [&](Context& world) {
    const int rank = world.rank();
    std::shared_ptr<Context> child = world.split(rank % 3, rank);  // {0,3}, {1,4}, {2,5}
    std::vector<int> members{rank % 3, rank % 3 + 3};
    if (rank % 3 != 0) {
      // Siblings go away while group 0 keeps working (their connections stay:
      // the world Context still holds them).
      child.reset();
      all_threads.arrive_and_wait();
      return;
    }
    all_threads.arrive_and_wait();
    for (int round = 0; round < 5; ++round) {
      std::vector<float> data = own_values(rank, 10000 + static_cast<size_t>(round));
      allreduce(*child, std::span(data), ReduceOp::sum);
      require_equal(data, expected_sum(members, data.size()), "child after its siblings left");
    }
  }));

  // The parent goes first: the child keeps the connections alive.
  std::vector<std::shared_ptr<Context>> children(size);
  require_all_ok(run_ranks(size, [&](Context& world) {
    children[static_cast<size_t>(world.rank())] = world.split(world.rank() < 2 ? 0 : 1, 0);
  }));
  // run_ranks destroyed every world Context; the children now hold the Mesh.
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(size);
  for (int rank = 0; rank < size; ++rank)
    threads.emplace_back([&, rank] {
      try {
        Context& child = *children[static_cast<size_t>(rank)];
        std::vector<float> data = own_values(rank, 4096);
        allreduce(child, std::span(data), ReduceOp::sum);
        require_equal(data, expected_sum(rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3, 4, 5}, 4096),
                      "child after its parent");
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  children.clear();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

TEST_CASE("split: kNoColor takes part and gets nothing; a bad color fails every rank", "[split]") {
  require_all_ok(run_ranks(4, [&](Context& world) {
    const int rank = world.rank();
    std::shared_ptr<Context> child = world.split(rank == 2 ? Context::kNoColor : 0, 0);
    if (rank == 2) {
      expect(child == nullptr, "kNoColor got a child");
    } else {
      expect(child->size() == 3, cat("child size ", child->size()));
      std::vector<float> data = own_values(rank, 10);
      allreduce(*child, std::span(data), ReduceOp::sum);
      require_equal(data, expected_sum({0, 1, 3}, 10), "the three colored ranks");
    }
  }));

  auto outcomes = run_ranks(3, [&](Context& world) { world.split(world.rank() == 1 ? -7 : 0, 0); }, 10s);
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    REQUIRE(outcomes[static_cast<size_t>(rank)].error);
    try {
      std::rethrow_exception(outcomes[static_cast<size_t>(rank)].error);
    } catch (const Error& error) {
      // Rank 1 rejects its own call; the others hear why from it.
      CHECK_THAT(std::string(error.what()), Catch::Contains("split color -7"));
    }
  }
}

TEST_CASE("a split facing another collective is a mismatch, not a hang", "[split]") {
  auto outcomes = run_ranks(
      3,
      [&](Context& world) {
        if (world.rank() == 0) {
          std::vector<float> data(2, 1.0f);
          allreduce(world, std::span(data), ReduceOp::sum);
        } else {
          world.split(0, 0);
        }
      },
      10s);
  for (const auto& outcome : outcomes) {
    REQUIRE(outcome.error);
    try {
      std::rethrow_exception(outcome.error);
    } catch (const TimeoutError& error) {
      FAIL("timed out instead of failing: " << error.what());
    } catch (const Error&) {
    }
  }
}

TEST_CASE("fake hosts: topology, shared memory within a host, TCP across", "[split][topology]") {
  // Hosts of 3, 1 and 2 ranks, not in rank order.
  const std::vector<std::string> host_of{"b", "a", "b", "c", "a", "b"};
  const int size = static_cast<int>(host_of.size());
  require_all_ok(run_ranks(
      size,
      [&](Context& world) {
        const int rank = world.rank();
        expect(world.hosts() == 3, cat(world.hosts(), " hosts"));
        // Hosts are numbered by their lowest rank: b = 0, a = 1, c = 2.
        const std::vector<int> host_index{0, 1, 0, 2, 1, 0};
        for (int r = 0; r < size; ++r)
          expect(world.host_of(r) == host_index[static_cast<size_t>(r)], cat("rank ", r, " on host ", world.host_of(r)));
        const std::vector<int> local_rank{0, 0, 1, 0, 1, 2};
        const std::vector<int> local_size{3, 2, 3, 1, 2, 3};
        expect(world.local_rank() == local_rank[static_cast<size_t>(rank)] &&
                   world.local_size() == local_size[static_cast<size_t>(rank)],
               cat("rank ", rank, " is local rank ", world.local_rank(), " of ", world.local_size()));
        for (int peer = 0; peer < size; ++peer) {
          if (peer == rank) continue;
          const PeerLink link = world.link_to(peer);
          const bool same_host = host_of[static_cast<size_t>(peer)] == host_of[static_cast<size_t>(rank)];
          expect(link.transport == (same_host ? "shm" : "tcp"),
                 cat("rank ", rank, " reaches rank ", peer, " over ", link.transport));
        }
        std::vector<int> all(static_cast<size_t>(size));
        std::iota(all.begin(), all.end(), 0);
        for (size_t count : {size_t{5}, size_t{65537}, size_t{1} << 20}) {
          std::vector<float> data = own_values(rank, count);
          allreduce(world, std::span(data), ReduceOp::sum);
          require_equal(data, expected_sum(all, count), "mixed-transport allreduce");
        }
        // The local communicator a hierarchical framework would build.
        std::shared_ptr<Context> local = world.split(world.host_of(rank), world.local_rank());
        expect(local->size() == world.local_size() && local->rank() == world.local_rank() && local->hosts() == 1,
               cat("the host-local child is rank ", local->rank(), " of ", local->size(), " on ", local->hosts(), " hosts"));
        std::vector<float> data = own_values(rank, 1000);
        allreduce(*local, std::span(data), ReduceOp::sum);
        std::vector<int> same_host;
        for (int r = 0; r < size; ++r)
          if (host_of[static_cast<size_t>(r)] == host_of[static_cast<size_t>(rank)]) same_host.push_back(r);
        require_equal(data, expected_sum(same_host, 1000), "host-local allreduce");
      },
      20s, [&](int rank, ConnectOptions& options) { options.host_id = host_of[static_cast<size_t>(rank)]; }));
}

TEST_CASE("CHORUS_TRANSPORT-style restrictions: a transport list that cannot reach a peer fails at connect",
          "[topology]") {
  auto outcomes = run_ranks(
      2, [](Context&) {}, 10s,
      [](int rank, ConnectOptions& options) {
        // Two hosts: shared memory cannot connect them. (Assigned from a
        // string, not a literal: g++ 12 misreports the literal's memcpy.)
        static const std::string hosts[2] = {"x", "y"};
        options.host_id = hosts[rank];
        options.transports = {"shm"};
      });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    REQUIRE(outcomes[static_cast<size_t>(rank)].error);
    REQUIRE_THROWS_WITH(std::rethrow_exception(outcomes[static_cast<size_t>(rank)].error),
                        Catch::Contains("no transport connects it to rank") && Catch::Contains("shm"));
  }
}
