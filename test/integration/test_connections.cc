// Connections on demand (ConnectOptions::connections, transport/mesh.h),
// with one thread per rank over real tcp sockets and shared memory: a
// Context connects no pair at start, a collective connects exactly the
// peers its Plan uses, later collectives and messages add theirs, results
// stay bit-exact, and a peer that never dials is named when the wait ends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "test/integration/rank_threads.h"

using namespace chorus;
using namespace chorus::testing;
using namespace std::chrono_literals;

namespace {

void expect(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error(what);
}

// The peers this rank holds connections to, ascending.
std::vector<int> connected_peers(const Context& context) {
  std::vector<int> peers;
  for (int peer = 0; peer < context.size(); ++peer)
    if (peer != context.rank() && context.link_to(peer).connected) peers.push_back(peer);
  return peers;
}

std::string list(const std::vector<int>& ranks) {
  std::string text;
  for (int rank : ranks) text += cat(text.empty() ? "" : ",", rank);
  return "{" + text + "}";
}

void expect_peers(const Context& context, std::vector<int> expected, const std::string& when) {
  std::sort(expected.begin(), expected.end());
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  const std::vector<int> got = connected_peers(context);
  expect(got == expected, cat("rank ", context.rank(), " ", when, ": connected to ", list(got), ", expected ",
                              list(expected)));
}

// Small integers: the sum is exact in any order.
void check_allreduce(Context& context, size_t count, const std::string& algorithm) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(context.rank() + 1 + static_cast<int>(i % 5));
  CollectiveOptions options;
  options.algorithm = algorithm;
  allreduce(context, std::span<float>(data), ReduceOp::sum, options);
  const int size = context.size();
  for (size_t i = 0; i < count; ++i) {
    const float expected = static_cast<float>(size * (size + 1) / 2 + size * static_cast<int>(i % 5));
    expect(data[i] == expected, cat("rank ", context.rank(), ": ", algorithm, " allreduce element ", i, " is ",
                                    data[i], ", expected ", expected));
  }
}

// Without measuring links: the probes of link_probe.h would connect pairs
// of their own at connect (the last test case counts those).
auto on_demand(const std::string& transport) {
  return [transport](int, ConnectOptions& options) {
    options.connections = Connections::on_demand;
    options.transports = {transport};
    options.measure_links = false;
  };
}

}  // namespace

TEST_CASE("on demand: each collective connects the peers its Plan uses, and no others", "[connections]") {
  for (const std::string transport : {"tcp", "shm"}) {
    INFO(transport);
    constexpr int size = 8;
    require_all_ok(run_ranks(
        size,
        [&](Context& context) {
          const int rank = context.rank();
          expect_peers(context, {}, "after connect");
          for (int peer = 0; peer < size; ++peer)
            if (peer != rank) expect(context.link_to(peer).transport == transport, "the route names the transport");
          // A ring uses its two neighbours; a second call connects nothing new.
          check_allreduce(context, 100000, "ring");
          const std::vector<int> ring = {(rank + 1) % size, (rank + size - 1) % size};
          expect_peers(context, ring, "after a ring allreduce");
          check_allreduce(context, 1000, "ring");
          expect_peers(context, ring, "after a second ring allreduce");
          // Recursive doubling at 8 ranks: rank ^ 1, ^ 2, ^ 4 besides.
          check_allreduce(context, 64, "recursive_doubling");
          std::vector<int> both = ring;
          for (int bit = 1; bit < size; bit <<= 1) both.push_back(rank ^ bit);
          expect_peers(context, both, "after a recursive-doubling allreduce");
          // Pairwise alltoall needs everyone.
          std::vector<int> input(size), output(size);
          for (int peer = 0; peer < size; ++peer) input[static_cast<size_t>(peer)] = rank * 100 + peer;
          CollectiveOptions pairwise;
          pairwise.algorithm = "pairwise";
          alltoall(context, std::span<const int>(input), std::span<int>(output), pairwise);
          for (int peer = 0; peer < size; ++peer)
            expect(output[static_cast<size_t>(peer)] == peer * 100 + rank,
                   cat("rank ", rank, ": alltoall block from ", peer, " is ", output[static_cast<size_t>(peer)]));
          std::vector<int> everyone;
          for (int peer = 0; peer < size; ++peer)
            if (peer != rank) everyone.push_back(peer);
          expect_peers(context, everyone, "after a pairwise alltoall");
        },
        20s, on_demand(transport)));
  }
}

TEST_CASE("on demand: point-to-point messages connect their pair, whichever rank posts first", "[connections]") {
  for (const std::string transport : {"tcp", "shm"}) {
    INFO(transport);
    constexpr int size = 4;
    require_all_ok(run_ranks(
        size,
        [&](Context& context) {
          const int rank = context.rank();
          // 0 sends to 3 (the lower rank first: it waits for 3 to dial) and
          // 3 answers; 2 sends to 1 (the higher rank first) and 1 answers.
          // 0-1, 0-2, 1-3 and 2-3 stay unconnected.
          const int peer = rank == 0 ? 3 : rank == 3 ? 0 : rank == 1 ? 2 : 1;
          const bool first = rank == 0 || rank == 2;
          std::vector<double> out(1000, rank + 0.5), in(1000, -1);
          if (first) {
            Work sent = send_async(context, std::span<double>(out), peer, 7);
            recv(context, std::span<double>(in), peer, 8);
            sent.wait();
          } else {
            recv(context, std::span<double>(in), peer, 7);
            send(context, std::span<double>(out), peer, 8);
          }
          for (double value : in)
            expect(value == peer + 0.5, cat("rank ", rank, ": received ", value, " from ", peer));
          expect_peers(context, {peer}, "after one exchange");
          // A collective afterwards adds the peers its Plan needs.
          check_allreduce(context, 4096, "ring");
          expect_peers(context, {peer, (rank + 1) % size, (rank + size - 1) % size}, "after a ring allreduce");
        },
        20s, on_demand(transport)));
  }
}

TEST_CASE("on demand: split children connect their members' pairs when they first need them", "[connections]") {
  constexpr int size = 6;
  require_all_ok(run_ranks(
      size,
      [&](Context& world) {
        // split runs an allgather on the world: its Plan connects some pairs.
        std::shared_ptr<Context> child = world.split(world.rank() % 2, world.rank());
        check_allreduce(*child, 3000, "ring");
        // Every world rank of the same parity is now a peer of the child's ring (3 members).
        for (int member = 0; member < child->size(); ++member)
          if (member != child->rank())
            expect(child->link_to(member).connected, cat("rank ", world.rank(), ": child member ", member,
                                                         " is not connected after the child's ring"));
        check_allreduce(world, 3000, "ring");
      },
      20s, on_demand("tcp")));
}

TEST_CASE("on demand: a peer that never needs the pair leaves the waiting rank an error naming it",
          "[connections]") {
  // Rank 0 sends to rank 1 (it waits for 1 to dial); rank 1 never posts to it.
  const auto outcomes = run_ranks(
      2,
      [](Context& context) {
        if (context.rank() == 1) {
          std::this_thread::sleep_for(1500ms);
          return;
        }
        std::vector<int> data(4, 1);
        CollectiveOptions options;
        options.timeout = 700ms;
        send(context, std::span<int>(data), 1, 3, options);
      },
      20s, on_demand("tcp"));
  REQUIRE(outcomes[0].error);
  REQUIRE_THROWS_AS(std::rethrow_exception(outcomes[0].error), TimeoutError);
  REQUIRE_THROWS_WITH(std::rethrow_exception(outcomes[0].error),
                      Catch::Contains("rank 0: timed out after") && Catch::Contains("waiting for peer rank 1"));
  REQUIRE_FALSE(outcomes[1].error);
}

TEST_CASE("connections: CHORUS_CONNECTIONS is parsed and checked", "[connections]") {
  REQUIRE(std::string(to_string(Connections::on_demand)) == "on-demand");
  REQUIRE(std::string(to_string(Connections::full_mesh)) == "full");
  REQUIRE(std::string(to_string(Connections::automatic)) == "auto");
  // Automatic below kFullMeshMaxRanks is the full mesh: every pair at connect.
  require_all_ok(run_ranks(
      3,
      [](Context& context) {
        for (int peer = 0; peer < context.size(); ++peer)
          if (peer != context.rank()) expect(context.link_to(peer).connected, "full mesh: every pair at connect");
      },
      20s, [](int, ConnectOptions& options) { options.connections = Connections::automatic; }));
}

TEST_CASE("on demand: measuring links connects only the probed pairs; link_to reports the models",
          "[connections][link-probe]") {
  // Ranks 0,1 on "host a", 2,3 on "host b" (all TCP): pairs 0-1 and 2-3
  // probe within a host, 0-2 between hosts.
  const std::vector<std::vector<int>> probed = {{1, 2}, {0}, {0, 3}, {2}};
  // Unset: measured, on demand as with the full mesh (unless the environment says otherwise).
  const bool by_default = Config::from_environment().measure_links.value_or(true);
  const std::optional<bool> settings[] = {true, false, std::nullopt};
  for (const std::optional<bool> asked : settings) {
    const bool measure = asked.value_or(by_default);
    INFO("measure_links " << (asked ? (*asked ? "true" : "false") : "unset"));
    require_all_ok(run_ranks(
        4,
        [&](Context& context) {
          const int rank = context.rank();
          expect_peers(context, measure ? probed[static_cast<size_t>(rank)] : std::vector<int>{}, "after connect");
          const PeerLink local = context.link_to(rank ^ 1), remote = context.link_to(rank ^ 2);
          for (const PeerLink& link : {local, remote}) {
            expect(link.measured == measure, cat("rank ", rank, ": measured is ", link.measured));
            expect(link.alpha_seconds > 0 && link.alpha_seconds < 0.1,
                   cat("rank ", rank, ": alpha ", link.alpha_seconds, " s"));
          }
          // The override still wins: remote:gbps=0.5 is 2e-9 s per byte, exactly.
          expect(remote.beta_seconds_per_byte == 2e-9,
                 cat("rank ", rank, ": remote beta ", remote.beta_seconds_per_byte, ", expected the override's 2e-9"));
          expect(local.beta_seconds_per_byte > 0 && local.beta_seconds_per_byte < 1e-6,
                 cat("rank ", rank, ": local beta ", local.beta_seconds_per_byte));
          check_allreduce(context, 5000, "auto");
        },
        20s, [asked](int rank, ConnectOptions& options) {
          options.connections = Connections::on_demand;
          options.transports = {"tcp"};
          options.host_id = rank < 2 ? "link-probe-host-a" : "link-probe-host-b";
          options.measure_links = asked;
          options.link_model = "remote:gbps=0.5";
        }));
  }
}
