// Call signatures and their descriptions; the algorithm registry; selection
// by name, by cost and by CHORUS_ALGO-style overrides.
#include <catch2/catch.hpp>

#include <set>

#include "algorithms/model/call.h"
#include "algorithms/execution/candidate.h"
#include "algorithms/selection/registry.h"
#include "algorithms/selection/selection.h"
#include "algorithms/shared_memory/board_exchange.h"
#include "backends/registry.h"
#include "base/error.h"
#include "base/log.h"

using namespace chorus;
using namespace chorus::algorithms;

TEST_CASE("the board prices a byte of an alltoall from its two measured sizes, on a line in log2 of the size") {
  BoardModel model;
  model.small_alltoall_seconds_per_byte = 100e-12;
  model.alltoall_seconds_per_byte = 400e-12;
  // At and past either end: that end's measurement.
  REQUIRE(model.alltoall_byte_seconds(1) == 100e-12);
  REQUIRE(model.alltoall_byte_seconds(Board::kSmallAlltoallBytes) == 100e-12);
  REQUIRE(model.alltoall_byte_seconds(Board::kMeasuredBytes) == 400e-12);
  REQUIRE(model.alltoall_byte_seconds(Board::kMeasuredBytes * 16) == 400e-12);
  // 256 KiB and 4 MiB are 4 doublings apart: each adds a quarter of the step.
  STATIC_REQUIRE(Board::kMeasuredBytes == 16 * Board::kSmallAlltoallBytes);
  REQUIRE(model.alltoall_byte_seconds(Board::kSmallAlltoallBytes * 2) == Approx(175e-12));
  REQUIRE(model.alltoall_byte_seconds(Board::kSmallAlltoallBytes * 4) == Approx(250e-12));
  REQUIRE(model.alltoall_byte_seconds(Board::kSmallAlltoallBytes * 8) == Approx(325e-12));
  // Rising with the size in between, never past either end.
  double last = 0;
  for (size_t bytes = Board::kSmallAlltoallBytes; bytes <= Board::kMeasuredBytes; bytes += 64 << 10) {
    const double cost = model.alltoall_byte_seconds(bytes);
    REQUIRE(cost >= last);
    REQUIRE(cost <= 400e-12);
    last = cost;
  }
}

TEST_CASE("the board prices a byte of an allreduce in pieces from its two measured sizes") {
  BoardModel model;
  model.seconds_per_byte = 200e-12;
  model.large_allreduce_seconds_per_byte = 100e-12;
  model.large_allreduce_bytes = Board::kMeasuredBytes * 4;
  // At and past either end: that end's measurement.
  REQUIRE(model.allreduce_byte_seconds(8) == 200e-12);
  REQUIRE(model.allreduce_byte_seconds(Board::kMeasuredBytes) == 200e-12);
  REQUIRE(model.allreduce_byte_seconds(Board::kMeasuredBytes * 4) == 100e-12);
  REQUIRE(model.allreduce_byte_seconds(Board::kMeasuredBytes * 64) == 100e-12);
  // Two doublings apart: the one between is half way.
  REQUIRE(model.allreduce_byte_seconds(Board::kMeasuredBytes * 2) == Approx(150e-12));
  // Where the cache holds a larger call (one size measured), one cost for every size.
  model.large_allreduce_bytes = Board::kMeasuredBytes;
  REQUIRE(model.allreduce_byte_seconds(Board::kMeasuredBytes / 2) == 200e-12);
  REQUIRE(model.allreduce_byte_seconds(Board::kMeasuredBytes * 2) == 100e-12);
}

TEST_CASE("call signatures describe the call they came from") {
  Call allreduce = make_call(Collective::allreduce, 0, 4, 1000, DataType::float32, ReduceOp::sum, 0, true);
  REQUIRE(describe_signature(call_signature(allreduce)) == "allreduce of 1000 float32 sum (4000 bytes)");
  Call broadcast = make_call(Collective::broadcast, 1, 4, 10, DataType::int8, ReduceOp::sum, 2, true);
  REQUIRE(describe_signature(call_signature(broadcast)) == "broadcast of 10 int8 from root 2 (10 bytes)");
  Call barrier = make_call(Collective::barrier, 3, 4, 0, DataType::float32, ReduceOp::sum, 0, true);
  REQUIRE(describe_signature(call_signature(barrier)) == "barrier");
  REQUIRE(describe_signature(0) == "unknown call (signature 0x0)");
  // Only the low 32 bits of the count travel.
  allreduce.count = (size_t{1} << 32) + 5;
  REQUIRE(describe_signature(call_signature(allreduce)) == "allreduce of 5 float32 sum (20 bytes)");
}

TEST_CASE("mismatch descriptions give every type's element count, and never a digest as a count") {
  for (size_t index = 0; index < data_type_count; ++index) {
    const auto type = static_cast<DataType>(index);
    const std::string name(to_string(type));
    INFO(name);
    // 18 x 18 x 18 elements per rank, the case a TensorFlow reducescatter reported as 1104548368 float32.
    Call reduce_scatter = make_call(Collective::reduce_scatter, 0, 2, 5832, type, ReduceOp::sum, 0, false);
    REQUIRE(describe_signature(call_signature(reduce_scatter)) ==
            cat("reduce_scatter of 5832 ", name, " sum (", 5832 * element_size(type), " bytes per rank)"));
    Call reduce_scatter_v = reduce_scatter;
    reduce_scatter_v.count = 0;
    reduce_scatter_v.counts = {2916, 2916};
    const std::string text = describe_signature(call_signature(reduce_scatter_v));
    REQUIRE_THAT(text, Catch::StartsWith(cat("reduce_scatterv of ", name, " (per-rank counts digest 0x")) &&
                           Catch::EndsWith(" sum"));
    Call allgatherv = make_call(Collective::allgather, 0, 2, 0, type, ReduceOp::sum, 0, false);
    allgatherv.counts = {5832, 5832};
    REQUIRE_THAT(describe_signature(call_signature(allgatherv)),
                 Catch::StartsWith(cat("allgatherv of ", name, " (per-rank counts digest 0x")));
    Call allreduce = make_call(Collective::allreduce, 0, 2, 5832, type, ReduceOp::max, 0, false);
    REQUIRE(describe_signature(call_signature(allreduce)) ==
            cat("allreduce of 5832 ", name, " max (", 5832 * element_size(type), " bytes)"));
  }
}

TEST_CASE("call signatures differ in everything that matters and ignore the rest") {
  const Call base = make_call(Collective::allreduce, 0, 4, 1000, DataType::float32, ReduceOp::sum, 0, true);
  std::set<uint64_t> signatures{call_signature(base)};
  Call changed = base;
  changed.count = 1001;
  signatures.insert(call_signature(changed));
  changed = base;
  changed.type = DataType::int32;
  signatures.insert(call_signature(changed));
  changed = base;
  changed.op = ReduceOp::max;
  signatures.insert(call_signature(changed));
  changed = base;
  changed.collective = Collective::broadcast;
  signatures.insert(call_signature(changed));
  REQUIRE(signatures.size() == 5);

  Call other_rank = base;
  other_rank.rank = 3;
  other_rank.root = 2;          // irrelevant to an allreduce
  other_rank.in_place = false;  // a per-rank choice
  REQUIRE(call_signature(other_rank) == call_signature(base));

  Call broadcast = make_call(Collective::broadcast, 0, 4, 10, DataType::int8, ReduceOp::sum, 1, true);
  Call other_root = broadcast;
  other_root.root = 2;
  REQUIRE(call_signature(broadcast) != call_signature(other_root));
  Call other_op = broadcast;
  other_op.op = ReduceOp::max;  // irrelevant to a broadcast
  REQUIRE(call_signature(broadcast) == call_signature(other_op));
}

TEST_CASE("a root check's signature leaves out the root and says what it is") {
  Call reduce = make_call(Collective::reduce, 0, 300, 10, DataType::int32, ReduceOp::max, 2, true);
  Call other_root = reduce;
  other_root.root = 258;  // the same low byte: only the check's payload tells them apart
  REQUIRE(call_signature(reduce) == call_signature(other_root));
  REQUIRE(root_check_signature(reduce) == root_check_signature(other_root));
  other_root.root = 7;
  REQUIRE(root_check_signature(reduce) == root_check_signature(other_root));
  // Neither a frame of the call's data nor another call's root check.
  REQUIRE(root_check_signature(reduce) != call_signature(reduce));
  Call other_count = reduce;
  other_count.count = 11;
  REQUIRE(root_check_signature(reduce) != root_check_signature(other_count));
  REQUIRE(describe_signature(root_check_signature(reduce)) == "reduce of 10 int32 max (40 bytes) (its root check)");
}

TEST_CASE("every collective but reduce carries the previous rooted call's root in its signature") {
  // (late_root_checks.h: a rooted call the ranks disagreed on fails the next.)
  std::vector<Call> calls{
      make_call(Collective::allreduce, 0, 4, 8, DataType::float32, ReduceOp::sum, 0, true),
      make_call(Collective::barrier, 0, 4, 0, DataType::uint8, ReduceOp::sum, 0, true),
      make_call(Collective::allgather, 0, 4, 8, DataType::float32, ReduceOp::sum, 0, true),
      make_call(Collective::reduce_scatter, 0, 4, 8, DataType::float32, ReduceOp::sum, 0, true),
      make_call(Collective::alltoall, 0, 4, 8, DataType::float32, ReduceOp::sum, 0, true),
      make_call(Collective::broadcast, 0, 4, 8, DataType::float32, ReduceOp::sum, 3, true),
      make_call(Collective::gather, 0, 4, 8, DataType::float32, ReduceOp::sum, 3, true),
      make_call(Collective::scatter, 0, 4, 8, DataType::float32, ReduceOp::sum, 3, true),
  };
  Call gatherv = make_call(Collective::gather, 0, 4, 0, DataType::float32, ReduceOp::sum, 3, true);
  gatherv.counts = {1, 2, 3, 4};
  Call reduce_scatter_v = make_call(Collective::reduce_scatter, 0, 4, 0, DataType::float32, ReduceOp::sum, 0, true);
  reduce_scatter_v.counts = {1, 2, 3, 4};
  calls.push_back(gatherv);
  calls.push_back(reduce_scatter_v);
  for (const Call& call : calls) {
    CAPTURE(to_string(call.collective), call.counts.size());
    Call after_none = call;
    Call after_0 = call;
    after_0.previous_root = 0;
    Call after_1 = call;
    after_1.previous_root = 1;
    Call after_254 = call;
    after_254.previous_root = 254;
    const std::set<uint64_t> signatures{call_signature(after_none), call_signature(after_0), call_signature(after_1),
                                        call_signature(after_254)};
    CHECK(signatures.size() == 4);
    // The call's own words stay; the chained root is shown where it fits.
    const std::string words = describe_signature(call_signature(after_1));
    CHECK(words.find(describe_signature(call_signature(after_none)).substr(0, 8)) == 0);
    if (call.counts.empty()) {
      CHECK(words.find(", after a rooted call naming root 1") != std::string::npos);
      const auto roots = chain_difference(call_signature(after_1), call_signature(after_254));
      REQUIRE(roots);
      CHECK(roots->theirs == 1);
      CHECK(roots->mine == 254);
    } else {
      CHECK(words.find("after a rooted call (its root folded into the digest)") != std::string::npos);
      CHECK_FALSE(chain_difference(call_signature(after_1), call_signature(after_254)));
    }
    // A rooted call's own root still differs on its own.
    if (call.collective == Collective::broadcast) {
      Call other_root = after_1;
      other_root.root = 2;
      CHECK(call_signature(other_root) != call_signature(after_1));
      CHECK_FALSE(chain_difference(call_signature(other_root), call_signature(after_1)));
    }
  }
  Call reduce = make_call(Collective::reduce, 0, 4, 8, DataType::float32, ReduceOp::sum, 3, true);
  Call reduce_after = reduce;
  reduce_after.previous_root = 2;
  CHECK(call_signature(reduce) == call_signature(reduce_after));  // no byte free: it carries none
  CHECK(describe_signature(call_signature(make_call(Collective::allreduce, 0, 4, 8, DataType::float32,
                                                    ReduceOp::sum, 0, true))) ==
        "allreduce of 8 float32 sum (32 bytes)");
}

TEST_CASE("a grouped call's signature is marked and carries its members' counts") {
  const Call plain = make_call(Collective::allreduce, 0, 2, 8, DataType::float32, ReduceOp::sum, 0, true);
  Call three_five = plain;
  three_five.group_digest = 0x35;
  Call five_three = plain;
  five_three.group_digest = 0x53;
  CHECK(call_signature(plain) != call_signature(three_five));
  CHECK(call_signature(three_five) != call_signature(five_three));
  // Digests that differ only above the 32 bits the count keeps still differ.
  Call high = plain;
  high.group_digest = 0x35 | (uint64_t{1} << 40);
  CHECK(call_signature(high) != call_signature(three_five));
  const std::string words = describe_signature(call_signature(three_five));
  INFO(words);
  CHECK(words.rfind("grouped allreduce of float32 sum (total and member counts digest 0x", 0) == 0);
  Call gather = make_call(Collective::allgather, 1, 2, 8, DataType::int32, ReduceOp::sum, 0, true);
  gather.group_digest = 7;
  CHECK(describe_signature(call_signature(gather)).rfind("grouped allgather of int32 (total and", 0) == 0);
}

TEST_CASE("registry lists one algorithm per collective by name") {
  REQUIRE(find_algorithm(Collective::allreduce, "ring") != nullptr);
  REQUIRE(find_algorithm(Collective::broadcast, "binomial") != nullptr);
  REQUIRE(find_algorithm(Collective::barrier, "dissemination") != nullptr);
  REQUIRE(find_algorithm(Collective::allreduce, "binomial") == nullptr);
  REQUIRE(algorithm_names(Collective::allreduce) ==
          "ring, recursive_doubling, halving_doubling, hierarchical, hierarchical_leader");
  for (const Algorithm& algorithm : all_algorithms()) {
    REQUIRE(algorithm.functions != nullptr);
    REQUIRE(algorithm.functions->build != nullptr);
  }
}

TEST_CASE("registry names the nccl backend for allreduce, chosen by name only") {
  backends::register_backends();
  const Candidate* nccl = find_candidate(Collective::allreduce, "nccl");
  REQUIRE(nccl != nullptr);
  REQUIRE(nccl->run != nullptr);
  REQUIRE(nccl->runs_at_issue);
  REQUIRE(find_candidate(Collective::broadcast, "nccl") == nullptr);
  REQUIRE(find_algorithm(Collective::allreduce, "nccl") == nullptr);
  REQUIRE(parse_algorithm_overrides("allreduce:nccl").at(Collective::allreduce) == "nccl");
  REQUIRE_THROWS_WITH(parse_algorithm_overrides("broadcast:nccl"), Catch::Contains("unknown broadcast algorithm 'nccl'"));
}

TEST_CASE("overrides parse collective:algorithm lists") {
  auto overrides = parse_algorithm_overrides(" allreduce:ring , broadcast : binomial");
  REQUIRE(overrides.size() == 2);
  REQUIRE(overrides.at(Collective::allreduce) == "ring");
  REQUIRE(overrides.at(Collective::broadcast) == "binomial");
  REQUIRE(parse_algorithm_overrides("").empty());
  REQUIRE(parse_algorithm_overrides("barrier:dissemination,").size() == 1);

  REQUIRE_THROWS_AS(parse_algorithm_overrides("allreduce"), InvalidArgument);
  REQUIRE_THROWS_WITH(parse_algorithm_overrides("allscatter:ring"), Catch::Contains("unknown collective 'allscatter'"));
  REQUIRE_THROWS_WITH(parse_algorithm_overrides("allreduce:tree"),
                      Catch::Contains("unknown allreduce algorithm 'tree'") && Catch::Contains("valid: ring"));
  REQUIRE_THROWS_WITH(parse_algorithm_overrides("allreduce:ring,allreduce:ring"), Catch::Contains("named twice"));
}

TEST_CASE("selection honours names, overrides and cost") {
  const CostModel model;
  const std::map<Collective, std::string> none;
  Call allreduce = make_call(Collective::allreduce, 2, 4, 1000, DataType::float32, ReduceOp::sum, 0, true);
  // 4 KB on 4 ranks: latency dominates, the fewest rounds win.
  REQUIRE(select_algorithm(allreduce, "auto", model, none).name == "recursive_doubling");
  REQUIRE(select_algorithm(allreduce, "ring", model, none).name == "ring");
  REQUIRE_THROWS_WITH(select_algorithm(allreduce, "halving", model, none),
                      Catch::Contains("rank 2") && Catch::Contains("unknown allreduce algorithm 'halving'") &&
                          Catch::Contains("valid: ring"));
  REQUIRE(select_algorithm(allreduce, "auto", model, parse_algorithm_overrides("allreduce:ring")).name == "ring");

  Call broadcast = make_call(Collective::broadcast, 0, 4, 10, DataType::int8, ReduceOp::sum, 3, true);
  REQUIRE(select_algorithm(broadcast, "auto", model, none).name == "binomial");
  broadcast.root = 4;  // not a rank: no algorithm can serve it
  REQUIRE_THROWS_AS(select_algorithm(broadcast, "auto", model, none), InvalidArgument);
  REQUIRE_THROWS_WITH(select_algorithm(broadcast, "binomial", model, none), Catch::Contains("cannot run"));

  Call barrier = make_call(Collective::barrier, 0, 4, 0, DataType::int8, ReduceOp::sum, 0, true);
  REQUIRE(select_algorithm(barrier, "auto", model, none).name == "dissemination");
  REQUIRE_THROWS_WITH(select_algorithm(barrier, "ring", model, none), Catch::Contains("valid: dissemination"));
}

TEST_CASE("the signature tells a call on device memory from one on host memory", "[selection]") {
  Call host = make_call(Collective::allreduce, 0, 2, 5, DataType::float32, ReduceOp::sum, 0, true);
  Call device = host;
  device.memory = Memory::cuda(0);
  CHECK(call_signature(host) != call_signature(device));
  CHECK(describe_signature(call_signature(device)) == "allreduce of 5 float32 sum (20 bytes) on device memory");
  Call barrier = make_call(Collective::barrier, 0, 2, 0, DataType::uint8, ReduceOp::sum, 0, true);
  Call device_barrier = barrier;
  device_barrier.memory = Memory::cuda(0);
  CHECK(call_signature(barrier) == call_signature(device_barrier));
}

TEST_CASE("on shared cores a large broadcast is priced by its total work too, and takes binomial", "[selection]") {
  // The link model 4 hosts x 1 rank measured on this 2-core machine.
  CostModel model = CostModel::from_link(LinkModel{.alpha_seconds = 17.35e-6, .beta_seconds_per_byte = 1 / 2.224e9});
  const std::map<Collective, std::string> none;
  const Algorithm& binomial = *find_algorithm(Collective::broadcast, "binomial");
  for (size_t bytes : {size_t{2} << 20, size_t{16} << 20}) {
    Call broadcast = make_call(Collective::broadcast, 1, 4, bytes / 4, DataType::float32, ReduceOp::sum, 0, true);
    // A core each: the chain's pipeline overlaps its links and wins.
    REQUIRE(select_algorithm(broadcast, "auto", model, none).name == "chain");
    model.cores_per_rank = 0.5;
    CHECK(select_algorithm(broadcast, "auto", model, none).name == "binomial");
    // Half a core each: three whole copies of the buffer over 2 cores,
    // longer than two rounds of a message that moves alone.
    const double n = static_cast<double>(bytes);
    const double alpha = model.alpha_seconds, beta = model.beta_seconds_per_byte;
    CHECK(binomial.cost_seconds(broadcast, model) == Approx(std::max(2 * (alpha + n * beta / 2), 3 * (alpha + n * beta) / 2)));
    model.cores_per_rank = 0;
  }
  // Two ranks: the bound changes nothing (one message, the probe's pace).
  Call pair = make_call(Collective::broadcast, 1, 2, 1 << 20, DataType::float32, ReduceOp::sum, 0, true);
  const double alone = binomial.cost_seconds(pair, model);
  model.cores_per_rank = 0.5;
  CHECK(binomial.cost_seconds(pair, model) == Approx(alone));
  // A core or more each is not sharing.
  model.cores_per_rank = 1;
  CHECK_FALSE(model.shares_cores());
}
