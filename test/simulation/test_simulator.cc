// The simulator finds the plan bugs it promises to find: deadlocks, races
// (missing dependencies), length mismatches, out-of-order messages and
// regions outside their buffer; and its cost estimate follows the model.
#include <catch2/catch.hpp>

#include <vector>

#include "base/error.h"
#include "simulation/simulator.h"

using namespace chorus;
using namespace chorus::algorithms;

namespace {

Call int32_allreduce(int size, size_t count) {
  return make_call(Collective::allreduce, 0, size, count, DataType::int32, ReduceOp::sum, 0, true);
}

struct TwoRanks {
  explicit TwoRanks(size_t count) : data(2, std::vector<int32_t>(count, 1)) {}
  std::vector<RankBuffers> views() { return {{data[0].data(), data[0].data()}, {data[1].data(), data[1].data()}}; }
  std::vector<std::vector<int32_t>> data;
};

}  // namespace

TEST_CASE("simulator reports a deadlock when both ranks receive before sending") {
  std::vector<Plan> plans(2);
  for (int rank = 0; rank < 2; ++rank) {
    StepId received = plans[rank].recv(1 - rank, 0, Region{BufferKind::output, 0, 4});
    plans[rank].send(Region{BufferKind::output, 4, 4}, 1 - rank, 0, {received});
  }
  TwoRanks job(2);
  REQUIRE_THROWS_WITH(simulate(plans, job.views(), int32_allreduce(2, 2)),
                      Catch::Contains("deadlock") && Catch::Contains("recv of slot 0 from rank 1"));
}

TEST_CASE("simulator reports a race when a step overwrites a region still being sent") {
  std::vector<Plan> plans(2);
  plans[0].send(Region{BufferKind::output, 0, 8}, 1, 0);
  plans[0].copy(Region{BufferKind::output, 8, 4}, Region{BufferKind::output, 4, 4});  // no dependency on the send
  plans[1].recv(0, 0, Region{BufferKind::output, 0, 8});
  TwoRanks job(3);
  REQUIRE_THROWS_WITH(simulate(plans, job.views(), int32_allreduce(2, 3)), Catch::Contains("race"));
}

TEST_CASE("simulator reports messages whose lengths differ") {
  std::vector<Plan> plans(2);
  plans[0].send(Region{BufferKind::output, 0, 8}, 1, 0);
  plans[1].recv(0, 0, Region{BufferKind::output, 0, 4});
  TwoRanks job(2);
  REQUIRE_THROWS_AS(simulate(plans, job.views(), int32_allreduce(2, 2)), MismatchError);
}

TEST_CASE("simulator reports messages received in another order than sent") {
  std::vector<Plan> plans(2);
  plans[0].send(Region{BufferKind::output, 0, 4}, 1, 0);
  plans[0].send(Region{BufferKind::output, 4, 4}, 1, 1);
  plans[1].recv(0, 1, Region{BufferKind::output, 4, 4});
  plans[1].recv(0, 0, Region{BufferKind::output, 0, 4});
  TwoRanks job(2);
  REQUIRE_THROWS_WITH(simulate(plans, job.views(), int32_allreduce(2, 2)), Catch::Contains("out of order"));
}

TEST_CASE("simulator reports regions outside their buffer and writes into the input") {
  std::vector<Plan> plans(1);
  plans[0].copy(Region{BufferKind::output, 0, 12}, Region{BufferKind::output, 4, 12});
  std::vector<int32_t> data(3);
  std::vector<RankBuffers> views{{data.data(), data.data()}};
  REQUIRE_THROWS_WITH(simulate(plans, views, int32_allreduce(1, 3)), Catch::Contains("outside its buffer"));

  std::vector<Plan> into_input(1);
  into_input[0].copy(Region{BufferKind::output, 0, 4}, Region{BufferKind::input, 0, 4});
  std::vector<int32_t> input(1);
  Call out_of_place = int32_allreduce(1, 1);
  out_of_place.in_place = false;
  std::vector<RankBuffers> separate{{input.data(), data.data()}};
  REQUIRE_THROWS(simulate(into_input, separate, out_of_place));
}

TEST_CASE("simulator moves data and estimates time with alpha and beta") {
  std::vector<Plan> plans(2);
  StepId sent = plans[0].send(Region{BufferKind::output, 0, 8}, 1, 7);
  plans[0].recv(1, 8, Region{BufferKind::output, 8, 8}, {sent});
  StepId received = plans[1].recv(0, 7, Region{BufferKind::output, 0, 8});
  plans[1].send(Region{BufferKind::output, 0, 8}, 0, 8, {received});
  std::vector<std::vector<int32_t>> data{{1, 2, 0, 0}, {0, 0, 0, 0}};
  std::vector<RankBuffers> views{{data[0].data(), data[0].data()}, {data[1].data(), data[1].data()}};
  SimulationOptions options;
  options.cost.alpha_seconds = 1.0;
  options.cost.beta_seconds_per_byte = 0.5;
  SimulationReport report = simulate(plans, views, int32_allreduce(2, 4), options);
  REQUIRE(data[0] == std::vector<int32_t>{1, 2, 1, 2});
  REQUIRE(data[1] == std::vector<int32_t>{1, 2, 0, 0});
  REQUIRE(report.ranks[0].messages_sent == 1);
  REQUIRE(report.ranks[1].bytes_sent == 8);
  // Two messages one after the other, each alpha + 8 beta = 5.
  REQUIRE(report.critical_path_seconds == 10.0);
}

TEST_CASE("plan steps may only depend on earlier steps") {
  Plan plan;
  plan.copy(Region{BufferKind::output, 0, 4}, Region{BufferKind::output, 4, 4});
  REQUIRE_THROWS(plan.copy(Region{BufferKind::output, 0, 4}, Region{BufferKind::output, 4, 4}, {5}));
  REQUIRE_THROWS(plan.reduce(Region{BufferKind::output, 0, 4}, Region{BufferKind::output, 4, 8}));
}
