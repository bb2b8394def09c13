// Alltoall (pairwise, bruck) and alltoallv (pairwise) checked in the
// simulator: every rank count 1..33, awkward counts, random count matrices
// with zeros, bit-exact; bytes and messages each rank sends against the
// formulas; scratch bounded.
#include <catch2/catch.hpp>

#include <random>

#include "algorithms/plans/alltoall/bruck_alltoall.h"
#include "algorithms/selection/registry.h"
#include "algorithms/selection/selection.h"
#include "base/error.h"
#include "test/algorithms/movement_check.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

const Algorithm& pairwise() { return *find_algorithm(Collective::alltoall, "pairwise"); }
const Algorithm& bruck() { return *find_algorithm(Collective::alltoall, "bruck"); }

void check_fixed(const Algorithm& algorithm, const Call& call) {
  MovementRun run = run_and_check(algorithm, call, PlanTuning{});
  INFO(describe(call, algorithm));
  const size_t block = call.bytes();
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank);
    size_t bytes = 0, messages = 0;
    if (block > 0 && algorithm.name == "pairwise") {
      bytes = static_cast<size_t>(call.size - 1) * block;
      messages = static_cast<size_t>(call.size - 1);
    }
    if (block > 0 && algorithm.name == "bruck")
      for (int round = 0; (1 << round) < call.size; ++round) {
        bytes += bruck_alltoall_round_blocks(call.size, round) * block;
        ++messages;
      }
    REQUIRE(run.report.ranks[rank].bytes_sent == bytes);
    REQUIRE(run.report.ranks[rank].messages_sent == messages);
    if (algorithm.name == "pairwise") REQUIRE(run.plans[rank].scratch_bytes == 0);
    REQUIRE(run.plans[rank].scratch_bytes <= 2 * static_cast<size_t>(call.size + 1) * block);
  }
}

}  // namespace

TEST_CASE("alltoall: pairwise and bruck, rank counts 1..33, awkward counts") {
  for (int size = 1; size <= 33; ++size)
    for (size_t count : awkward_counts(size))
      for (const Algorithm* algorithm : {&pairwise(), &bruck()}) {
        Call call = make_call(Collective::alltoall, 0, size, count, DataType::int32, ReduceOp::sum, 0, false);
        check_fixed(*algorithm, call);
        call.type = DataType::float16;
        if (count == 2 && size % 3 == 0) check_fixed(*algorithm, call);
      }
}

TEST_CASE("alltoall bruck sends about half the buffer per round") {
  // 2 rounds of 2 blocks on 4 ranks; on 5: bits 0,1,2 of 0..4 -> 2, 2, 1 blocks.
  REQUIRE(bruck_alltoall_round_blocks(4, 0) == 2);
  REQUIRE(bruck_alltoall_round_blocks(4, 1) == 2);
  REQUIRE(bruck_alltoall_round_blocks(5, 2) == 1);
}

TEST_CASE("alltoallv: random count matrices with zeros, pairwise") {
  std::mt19937 random(99);
  for (int size = 1; size <= 33; ++size)
    for (int trial = 0; trial < 3; ++trial) {
      // The whole size x size matrix travels in send_counts; run_and_check
      // gives each rank its row (sends) and column (receives).
      Call call = make_call(Collective::alltoall, 0, size, 0, DataType::int32, ReduceOp::sum, 0, false);
      for (int row = 0; row < size; ++row)
        for (size_t count : random_counts(random, size, trial == 2 ? 150 : 3)) call.send_counts.push_back(count);
      if (trial == 0) std::fill(call.send_counts.begin(), call.send_counts.end(), 0);
      call.recv_counts = call.send_counts;  // replaced per rank
      MovementRun run = run_and_check(pairwise(), call, PlanTuning{});
      for (int rank = 0; rank < size; ++rank) {
        size_t bytes = 0;
        for (int peer = 0; peer < size; ++peer)
          if (peer != rank) bytes += call.send_counts[static_cast<size_t>(rank * size + peer)] * 4;
        REQUIRE(run.report.ranks[rank].bytes_sent == bytes);
        // Even empty blocks travel, so a peer expecting other counts is told, not left waiting.
        REQUIRE(run.report.ranks[rank].messages_sent == static_cast<size_t>(size - 1));
        REQUIRE(run.plans[rank].scratch_bytes == 0);
      }
    }
}

TEST_CASE("alltoallv whose counts disagree between ranks is a mismatch, not a hang") {
  const int size = 3;
  std::vector<Plan> plans;
  std::vector<Call> calls;
  std::vector<std::vector<int32_t>> inputs(size, std::vector<int32_t>(8)), outputs(size, std::vector<int32_t>(8));
  std::vector<RankBuffers> views;
  for (int rank = 0; rank < size; ++rank) {
    Call call = make_call(Collective::alltoall, rank, size, 0, DataType::int32, ReduceOp::sum, 0, false);
    call.send_counts = {1, 1, 1};
    call.recv_counts = {1, 1, 1};
    if (rank == 2) call.recv_counts = {2, 1, 1};  // rank 0 sends it only one element
    plans.push_back(pairwise().build(call, PlanTuning{}));
    calls.push_back(call);
    views.push_back(RankBuffers{inputs[rank].data(), outputs[rank].data()});
  }
  REQUIRE_THROWS_AS(simulate(plans, views, calls), MismatchError);
}

TEST_CASE("alltoall selection and refusals") {
  const CostModel model;
  Call call = make_call(Collective::alltoall, 0, 16, 1, DataType::float32, ReduceOp::sum, 0, false);
  REQUIRE(select_algorithm(call, "auto", model, {}).name == "bruck");
  call.count = 1 << 20;
  REQUIRE(select_algorithm(call, "auto", model, {}).name == "pairwise");
  call.count = 0;
  call.send_counts.assign(16, 1);
  call.recv_counts.assign(16, 1);
  REQUIRE(select_algorithm(call, "auto", model, {}).name == "pairwise");
  REQUIRE_THROWS_WITH(select_algorithm(call, "bruck", model, {}), Catch::Contains("pairwise, bruck"));
  Call in_place = make_call(Collective::alltoall, 0, 4, 8, DataType::float32, ReduceOp::sum, 0, true);
  REQUIRE_THROWS_AS(select_algorithm(in_place, "auto", model, {}), InvalidArgument);
}
