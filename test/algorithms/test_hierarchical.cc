// The hierarchical (two-level) Plans in the simulator: bit-exact results on
// uniform, uneven, single-rank and interleaved hosts up to thousands of
// ranks; only the rails cross hosts, carrying 2 (H-1)/H of the buffer per
// uplink; phases chosen by the cost model of their level; and selection
// that picks them where the uplinks are the bottleneck.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "algorithms/composition/composed_plan.h"
#include "algorithms/composition/hierarchical_allreduce.h"
#include "algorithms/composition/hierarchical_broadcast.h"
#include "algorithms/selection/registry.h"
#include "algorithms/selection/selection.h"
#include "base/error.h"
#include "test/algorithms/job_buffers.h"
#include "test/algorithms/movement_check.h"
#include "test/algorithms/reduction_checks.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

Call on_hosts(Call call, const Topology& topology) {
  call.size = topology.size();
  call.topology = std::make_shared<const Topology>(topology);
  return call;
}

Call allreduce_call(const Topology& topology, size_t count, DataType type, ReduceOp op, bool in_place) {
  return on_hosts(make_call(Collective::allreduce, 0, 1, count, type, op, 0, in_place), topology);
}

// Fast local links, slow uplinks: a shared-memory host on a 1 Gbit/s network.
CostModel two_level_model() {
  return CostModel::from_levels(LinkModel{2e-6, 1.0 / 8e9}, LinkModel{50e-6, 1.0 / 0.125e9}, true);
}

PlanTuning with_model(PlanTuning tuning, const CostModel& model) {
  tuning.cost_model = model;
  return tuning;
}

std::vector<Topology> small_topologies() {
  return {Topology::blocks({2, 2}),     Topology::blocks({1, 2, 3}),    Topology::blocks({3, 2, 1}),
          Topology::blocks({4, 4}),     Topology::blocks({1, 1, 2}),    Topology::blocks({2, 2, 2, 2}),
          Topology::blocks({5, 3}),     Topology::blocks({1, 7}),       Topology(std::vector<int>{0, 1, 0, 1}),
          Topology(std::vector<int>{2, 0, 1, 2, 0, 1, 1}), Topology(std::vector<int>{0, 0, 0, 1, 1, 0})};
}

// Bytes each host sends to other hosts, for every host.
std::vector<size_t> uplink_bytes(const std::vector<Plan>& plans, const Topology& topology) {
  std::vector<size_t> bytes(static_cast<size_t>(topology.hosts()), 0);
  for (int rank = 0; rank < topology.size(); ++rank)
    for (const Step& step : plans[static_cast<size_t>(rank)].steps())
      if (step.kind == StepKind::send && !topology.same_host(rank, step.peer))
        bytes[static_cast<size_t>(topology.host_of(rank))] += step.from.length;
  return bytes;
}

}  // namespace

TEST_CASE("hierarchical allreduce Plans are exact on uniform, uneven and interleaved hosts") {
  const Algorithm& rails = *find_algorithm(Collective::allreduce, "hierarchical");
  const Algorithm& leaders = *find_algorithm(Collective::allreduce, "hierarchical_leader");
  for (const Topology& topology : small_topologies()) {
    INFO("topology " << topology.describe());
    for (const Algorithm* algorithm : {&rails, &leaders}) {
      INFO("algorithm " << algorithm->name);
      const Builder build = algorithm->functions->build;
      for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{1009}})
        for (bool in_place : {true, false}) {
          run_and_check(build, allreduce_call(topology, count, DataType::int32, ReduceOp::sum, in_place),
                        tiny_segments);
          run_and_check(build, allreduce_call(topology, count, DataType::float32, ReduceOp::avg, in_place),
                        with_model(default_tuning, two_level_model()));
        }
      for (ReduceOp op : reduction_ops_all())
        run_and_check(build, allreduce_call(topology, 301, DataType::int64, op, false), tiny_segments);
      for (DataType type : {DataType::bfloat16, DataType::float16, DataType::int8, DataType::float64})
        run_and_check(build, allreduce_call(topology, 513, type, ReduceOp::max, true), tiny_segments);
    }
  }
}

TEST_CASE("hierarchical allreduce: every phase choice the cost model can make is exact") {
  // Models that make the rails and the leaders pick each flat algorithm.
  const std::vector<CostModel> models = {
      two_level_model(),
      CostModel::from_levels(LinkModel{1e-3, 1e-12}, LinkModel{1e-3, 1e-12}, true),  // latency only
      CostModel::from_levels(LinkModel{1e-9, 1e-9}, LinkModel{1e-9, 1e-6}, true),    // bandwidth only
  };
  for (const Topology& topology : {Topology::blocks({3, 3, 3}), Topology::blocks({2, 1, 4, 2, 3})})
    for (const CostModel& model : models)
      for (const char* name : {"hierarchical", "hierarchical_leader"})
        for (size_t count : {size_t{5}, size_t{20000}}) {
          INFO(topology.describe() << " " << name << " count " << count);
          run_and_check(find_algorithm(Collective::allreduce, name)->functions->build,
                        allreduce_call(topology, count, DataType::int32, ReduceOp::sum, count == 5),
                        with_model(PlanTuning{1024, 2}, model));
        }
}

TEST_CASE("hierarchical allreduce at thousands of ranks") {
  // 128 hosts of 16 and one of 3, as a cluster with a partial node would have.
  std::vector<int> per_host(128, 16);
  per_host.push_back(3);
  const Topology big = Topology::blocks(per_host);
  REQUIRE(big.size() == 2051);
  for (const char* name : {"hierarchical", "hierarchical_leader"}) {
    INFO(name);
    run_and_check(find_algorithm(Collective::allreduce, name)->functions->build,
                  allreduce_call(big, 37, DataType::int32, ReduceOp::sum, true),
                  with_model(default_tuning, two_level_model()));
  }
}

TEST_CASE("hierarchical allreduce: only the rails cross hosts; each uplink carries 2 (H-1)/H of the buffer") {
  const size_t count = 12 * 4096;  // every slice divides evenly among every rail
  for (const Topology& topology : {Topology::blocks({2, 2}), Topology::blocks({4, 4, 4}), Topology::blocks({1, 2, 4}),
                                   Topology(std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1})}) {
    INFO(topology.describe());
    const Call call = allreduce_call(topology, count, DataType::float32, ReduceOp::sum, true);
    ReductionRun run = run_and_check(find_algorithm(Collective::allreduce, "hierarchical")->functions->build, call,
                                     PlanTuning{4096, 4});  // no model: the rails run rings
    const double hosts = topology.hosts();
    for (size_t bytes : uplink_bytes(run.plans, topology))
      REQUIRE(bytes == static_cast<size_t>(2 * (hosts - 1) / hosts * static_cast<double>(call.bytes())));
    // The flat ring over the same ranks in rank order crosses more.
    if (topology == Topology::blocks({2, 2})) {
      Call flat = call;
      const std::vector<Plan> ring = build_plans(find_algorithm(Collective::allreduce, "ring")->functions->build, flat,
                                                 PlanTuning{4096, 4});
      REQUIRE(uplink_bytes(ring, topology)[0] == call.bytes() * 3 / 2);
    }
  }
}

TEST_CASE("hierarchical broadcast Plans are exact from every root") {
  const Algorithm& algorithm = *find_algorithm(Collective::broadcast, "hierarchical");
  for (const Topology& topology : small_topologies()) {
    for (int root = 0; root < topology.size(); ++root)
      for (size_t count : {size_t{0}, size_t{1}, size_t{1009}}) {
        Call call = on_hosts(make_call(Collective::broadcast, 0, 1, count, DataType::int32, ReduceOp::sum, root, true),
                             topology);
        run_and_check(algorithm, call, PlanTuning{64, 4});
        if (count == 1009) run_and_check(algorithm, call, with_model(PlanTuning{}, two_level_model()));
      }
    // Each host receives the buffer once over its uplink.
    Call call = on_hosts(make_call(Collective::broadcast, 0, 1, 4096, DataType::int32, ReduceOp::sum, 0, true),
                         topology);
    MovementRun run = run_and_check(algorithm, call, PlanTuning{});
    size_t crossing = 0;
    for (size_t bytes : uplink_bytes(run.plans, topology)) crossing += bytes;
    REQUIRE(crossing == static_cast<size_t>(topology.hosts() - 1) * call.bytes());
  }
  std::vector<int> per_host(100, 20);
  const Topology big = Topology::blocks(per_host);
  run_and_check(algorithm,
                on_hosts(make_call(Collective::broadcast, 0, 1, 33, DataType::int32, ReduceOp::sum, 1234, true), big),
                with_model(PlanTuning{}, two_level_model()));
}

TEST_CASE("hierarchical allgather and reduce-scatter Plans are exact, v variants with zeros included") {
  const Algorithm& allgather = *find_algorithm(Collective::allgather, "hierarchical");
  const Algorithm& reduce_scatter = *find_algorithm(Collective::reduce_scatter, "hierarchical");
  std::mt19937 random(7);
  for (const Topology& topology : small_topologies()) {
    INFO(topology.describe());
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{1009}}) {
      for (bool in_place : {true, false})
        run_and_check(allgather, on_hosts(make_call(Collective::allgather, 0, 1, count, DataType::int32,
                                                    ReduceOp::sum, 0, in_place), topology),
                      PlanTuning{64, 4});
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
        run_and_check(reduce_scatter.functions->build,
                      on_hosts(make_call(Collective::reduce_scatter, 0, 1, count, DataType::float32, op, 0, false),
                               topology),
                      count == 1009 ? PlanTuning{} : tiny_segments);
    }
    Call allgatherv = on_hosts(make_call(Collective::allgather, 0, 1, 0, DataType::int8, ReduceOp::sum, 0, false),
                               topology);
    allgatherv.counts = random_counts(random, topology.size(), 300);
    run_and_check(allgather, allgatherv, PlanTuning{64, 4});
    Call reduce_scatter_v = on_hosts(
        make_call(Collective::reduce_scatter, 0, 1, 0, DataType::int32, ReduceOp::bxor, 0, false), topology);
    reduce_scatter_v.counts = random_counts(random, topology.size(), 300);
    run_and_check(reduce_scatter.functions->build, reduce_scatter_v, tiny_segments);
  }
  std::vector<int> per_host(32, 16);
  per_host.push_back(5);
  const Topology big = Topology::blocks(per_host);
  run_and_check(allgather,
                on_hosts(make_call(Collective::allgather, 0, 1, 2, DataType::int32, ReduceOp::sum, 0, true), big),
                PlanTuning{});
  run_and_check(reduce_scatter.functions->build,
                on_hosts(make_call(Collective::reduce_scatter, 0, 1, 2, DataType::int32, ReduceOp::sum, 0, false), big),
                PlanTuning{});
}

TEST_CASE("hierarchical allgather and reduce-scatter: each uplink carries (P-L)/P of the data") {
  for (const Topology& topology : {Topology::blocks({2, 2}), Topology::blocks({3, 3, 3}),
                                   Topology(std::vector<int>{0, 1, 0, 1, 0, 1})}) {
    INFO(topology.describe());
    const size_t count = 1000;
    const size_t all_blocks = count * 4 * static_cast<size_t>(topology.size());
    const size_t expected = all_blocks / static_cast<size_t>(topology.size()) *
                            static_cast<size_t>(topology.size() - topology.local_size(0));
    MovementRun gathered = run_and_check(
        *find_algorithm(Collective::allgather, "hierarchical"),
        on_hosts(make_call(Collective::allgather, 0, 1, count, DataType::float32, ReduceOp::sum, 0, false), topology),
        PlanTuning{});
    ReductionRun scattered = run_and_check(
        find_algorithm(Collective::reduce_scatter, "hierarchical")->functions->build,
        on_hosts(make_call(Collective::reduce_scatter, 0, 1, count, DataType::float32, ReduceOp::sum, 0, false),
                 topology),
        PlanTuning{});
    for (size_t bytes : uplink_bytes(gathered.plans, topology)) REQUIRE(bytes == expected);
    for (size_t bytes : uplink_bytes(scattered.plans, topology)) REQUIRE(bytes == expected);
  }
}

TEST_CASE("hierarchical algorithms need two levels and say so") {
  const Algorithm& rails = *find_algorithm(Collective::allreduce, "hierarchical");
  const Call one_host = allreduce_call(Topology::single_host(4), 100, DataType::float32, ReduceOp::sum, true);
  const Call one_rank_each = allreduce_call(Topology::blocks({1, 1, 1}), 100, DataType::float32, ReduceOp::sum, true);
  REQUIRE_FALSE(rails.supports(one_host));
  REQUIRE_FALSE(rails.supports(one_rank_each));
  REQUIRE_FALSE(find_algorithm(Collective::broadcast, "hierarchical")->supports(one_rank_each));
  REQUIRE_THROWS_WITH(rails.build(one_host, PlanTuning{}), Catch::Contains("two or more hosts"));
  REQUIRE_THROWS_WITH(select_algorithm(one_host, "hierarchical", CostModel{}, {}),
                      Catch::Contains("cannot run") && Catch::Contains("valid:"));
}

TEST_CASE("hierarchical: auto picks the two-level algorithms where the uplinks are the bottleneck") {
  const CostModel model = two_level_model();
  const Topology two_by_two = Topology::blocks({2, 2});
  auto chosen = [&](const Topology& topology, size_t bytes) {
    const Call call = allreduce_call(topology, bytes / 4, DataType::float32, ReduceOp::sum, true);
    return std::string(select_algorithm(call, "auto", model, {}).name);
  };
  REQUIRE(chosen(two_by_two, 64 << 20) == "hierarchical");
  REQUIRE(chosen(two_by_two, 4 << 20) == "hierarchical");
  // Small messages: one remote round instead of two, by either variant; with
  // many ranks per host the leaders' trees beat the rails' direct exchanges.
  // Smallest messages: recursive doubling, whose first rounds stay within
  // each host (priced by round), pays one remote round as the two-level
  // variants do and fewer local ones. Past that, its crossing rounds share
  // the uplinks: with many ranks per host the leaders' trees win, on 2
  // hosts of 2 the rails; uneven hosts make its rounds cross more often.
  REQUIRE(chosen(two_by_two, 8) == "recursive_doubling");
  REQUIRE(chosen(Topology::blocks({8, 8}), 8) == "recursive_doubling");
  REQUIRE(chosen(Topology::blocks({8, 8}), 512) == "hierarchical_leader");
  REQUIRE(chosen(two_by_two, 4096) == "hierarchical");
  REQUIRE(chosen(Topology::blocks({1, 2, 3}), 8) == "hierarchical_leader");
  REQUIRE(chosen(Topology::blocks({1, 2, 3}), 64 << 20) == "hierarchical");
  // One host: the flat algorithms only.
  const std::string single = chosen(Topology::single_host(4), 64 << 20);
  REQUIRE(single.find("hierarchical") == std::string::npos);

  const Call broadcast =
      on_hosts(make_call(Collective::broadcast, 0, 1, 1 << 20, DataType::float32, ReduceOp::sum, 0, true),
               Topology::blocks({4, 4, 4, 4}));
  REQUIRE(std::string(select_algorithm(broadcast, "auto", model, {}).name) == "hierarchical");
  for (Collective collective : {Collective::allgather, Collective::reduce_scatter}) {
    const Call blocks = on_hosts(make_call(collective, 0, 1, 1 << 18, DataType::float32, ReduceOp::sum, 0, false),
                                 two_by_two);
    REQUIRE(std::string(select_algorithm(blocks, "auto", model, {}).name) == "hierarchical");
  }
}

TEST_CASE("recursive doubling across hosts is priced round by round: local rounds at the local link, crossing "
          "ones at the remote link shared by a host's crossing ranks") {
  const CostModel model = two_level_model();
  const Algorithm& doubling = *find_algorithm(Collective::allreduce, "recursive_doubling");
  const size_t bytes = 4096;
  const auto round = [&](LinkLevel level, int sharing) {
    const CostModel link = model.at(level);
    return link.alpha_seconds +
           static_cast<double>(bytes) * (sharing * link.beta_seconds_per_byte + link.gamma_seconds_per_byte);
  };
  const auto cost = [&](const Topology& topology) {
    return doubling.cost_seconds(allreduce_call(topology, bytes / 4, DataType::float32, ReduceOp::sum, true), model);
  };
  // {0,1} {2,3}: distance 1 within the hosts, distance 2 across, both ranks of a host crossing.
  CHECK(cost(Topology::blocks({2, 2})) == Approx(round(LinkLevel::local, 1) + round(LinkLevel::remote, 2)));
  // {0,2} {1,3}: distance 1 across, distance 2 within.
  CHECK(cost(Topology(std::vector<int>{0, 1, 0, 1})) ==
        Approx(round(LinkLevel::remote, 2) + round(LinkLevel::local, 1)));
  // One rank a host: every round crosses, one rank each: the flat price.
  CHECK(cost(Topology::blocks({1, 1, 1, 1})) == Approx(2 * round(LinkLevel::remote, 1)));
  // 3 ranks on 2 hosts {0,1} {2}: ranks 0 and 1 fold within their host, then 0 and 2 cross.
  CHECK(cost(Topology::blocks({2, 1})) ==
        Approx(round(LinkLevel::remote, 1) + 2 * (model.at(LinkLevel::local).alpha_seconds +
                                                   bytes * model.at(LinkLevel::local).beta_seconds_per_byte) +
               bytes * model.gamma_seconds_per_byte));
}

TEST_CASE("hierarchical: composed plans order conflicting steps and nothing else") {
  ComposedPlan plan(true);
  const StepId received = plan.recv(1, 0, Region{BufferKind::output, 0, 8});
  const StepId sent_left = plan.send(Region{BufferKind::output, 0, 4}, 2, 0);   // reads what the recv wrote
  const StepId sent_right = plan.send(Region{BufferKind::output, 4, 4}, 2, 1);  // likewise
  const StepId other = plan.send(Region{BufferKind::output, 8, 4}, 2, 2);       // untouched bytes: free
  const StepId overwrite = plan.recv(3, 0, Region{BufferKind::output, 2, 4});   // after both readers
  const StepId input_alias = plan.copy(Region{BufferKind::input, 16, 4}, Region{BufferKind::scratch, 0, 4});
  Plan built = std::move(plan).take();
  auto dependencies = [&](StepId id) {
    auto span = built.dependencies(built.step(id));
    return std::vector<StepId>(span.begin(), span.end());
  };
  REQUIRE(dependencies(received).empty());
  REQUIRE(dependencies(sent_left) == std::vector<StepId>{received});
  REQUIRE(dependencies(sent_right) == std::vector<StepId>{received});
  REQUIRE(dependencies(other).empty());
  REQUIRE(dependencies(overwrite) == std::vector<StepId>{received, sent_left, sent_right});
  REQUIRE(dependencies(input_alias).empty());
}

TEST_CASE("hierarchical: on shared cores the leaders' phase has the call's cores, and a large broadcast takes it") {
  // The links 2 hosts x 2 ranks measured on this 2-core machine.
  CostModel model = CostModel::from_levels(LinkModel{.alpha_seconds = 9.2e-6, .beta_seconds_per_byte = 1 / 4.16e9},
                                           LinkModel{.alpha_seconds = 11.2e-6, .beta_seconds_per_byte = 1 / 2.21e9},
                                           true);
  model.cores_per_rank = 0.5;
  const Algorithm& hierarchical = *find_algorithm(Collective::broadcast, "hierarchical");
  for (size_t bytes : {size_t{2} << 20, size_t{16} << 20}) {
    const Call broadcast = on_hosts(
        make_call(Collective::broadcast, 0, 1, bytes / 4, DataType::float32, ReduceOp::sum, 0, true),
        Topology::blocks({2, 2}));
    CHECK(std::string(select_algorithm(broadcast, "auto", model, {}).name) == "hierarchical");
    // The leaders' message moves alone (half the probe's two-way beta) over
    // the call's 2 cores; each host's then has its share, 1 core for 2 ranks.
    const double n = static_cast<double>(bytes);
    const double remote = model.remote.alpha_seconds + n * model.remote.beta_seconds_per_byte / 2;
    const double local = model.local.alpha_seconds + n * model.local.beta_seconds_per_byte;
    CHECK(hierarchical.cost_seconds(broadcast, model) == Approx(remote + local));
  }
}
