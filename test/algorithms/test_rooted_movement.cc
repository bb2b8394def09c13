// Large-message broadcasts (scatter_allgather, chain) and gather/scatter
// (linear, binomial, and their v variants) checked in the simulator: every
// rank count 1..33, every root, awkward and random counts, in and out of
// place, bit-exact; bytes and messages each rank sends against each
// algorithm's formula; scratch bounded.
#include <catch2/catch.hpp>

#include <random>

#include "algorithms/model/block_layout.h"
#include "algorithms/selection/registry.h"
#include "algorithms/plans/allreduce/ring_allreduce.h"
#include "algorithms/plans/broadcast/scatter_allgather_broadcast.h"
#include "algorithms/selection/selection.h"
#include "test/algorithms/movement_check.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

int subtree_end(int relative, int size) {
  return relative == 0 ? size : std::min(size, relative + lowest_bit(relative));
}

// Bytes of the blocks of relative ranks [first, last) (relative to root).
size_t relative_bytes(const std::vector<size_t>& bytes, int root, int first, int last) {
  size_t total = 0;
  for (int v = first; v < last; ++v) total += bytes[wrap_rank(v + root, static_cast<int>(bytes.size()))];
  return total;
}

// Children of relative rank v in the lowest-bit binomial tree.
std::vector<int> tree_children(int relative, int size) {
  std::vector<int> children;
  const int limit = relative == 0 ? size : lowest_bit(relative);
  for (int step = 1; step < limit && relative + step < size; step *= 2) children.push_back(relative + step);
  return children;
}

ExpectedSends expected_broadcast(std::string_view name, const Call& call, int rank, const PlanTuning& tuning) {
  ExpectedSends expected;
  const int size = call.size;
  if (size == 1 || call.count == 0) return expected;
  const int relative = wrap_rank(rank - call.root, size);
  const size_t segment = segment_bytes_of(tuning, call.element_bytes());
  if (name == "chain") {
    if (relative == size - 1) return expected;
    return {call.bytes(), segment_count(call.bytes(), segment)};
  }
  // scatter_allgather: chunk v belongs to relative rank v.
  std::vector<size_t> chunk(static_cast<size_t>(size));
  for (int c = 0; c < size; ++c) chunk[c] = ring_chunk_elements(call.count, size, c) * call.element_bytes();
  for (int child : tree_children(relative, size)) {
    size_t range = 0;
    for (int c = child; c < subtree_end(child, size); ++c) range += chunk[c];
    expected.bytes += range;
    expected.messages += range > 0;
  }
  // The ring sends every chunk except the one of relative rank v + 1.
  for (int c = 0; c < size; ++c) {
    if (c == wrap_rank(relative + 1, size)) continue;
    expected.bytes += chunk[c];
    expected.messages += segment_count(chunk[c], segment);
  }
  return expected;
}

ExpectedSends expected_gather_scatter(std::string_view name, const Call& call, int rank) {
  ExpectedSends expected;
  const std::vector<size_t> bytes = block_bytes(call);
  const int size = call.size, root = call.root;
  const int relative = wrap_rank(rank - root, size);
  if (size == 1) return expected;
  const bool gather = call.collective == Collective::gather;
  auto add = [&](size_t length) {
    expected.bytes += length;
    expected.messages += length > 0;
  };
  if (name == "linear") {
    if (gather && rank != root) add(bytes[rank]);
    if (!gather && rank == root)
      for (int peer = 0; peer < size; ++peer)
        if (peer != root) add(bytes[peer]);
    return expected;
  }
  // binomial: a gather sends its subtree up; a scatter sends each child's subtree down.
  if (gather) {
    if (relative != 0) add(relative_bytes(bytes, root, relative, subtree_end(relative, size)));
  } else {
    for (int child : tree_children(relative, size)) add(relative_bytes(bytes, root, child, subtree_end(child, size)));
  }
  return expected;
}

std::vector<const Algorithm*> algorithms_of(Collective collective) {
  std::vector<const Algorithm*> found;
  for (const Algorithm& algorithm : all_algorithms())
    if (algorithm.collective == collective) found.push_back(&algorithm);
  return found;
}

void check_broadcast(const Algorithm& algorithm, const Call& call, const PlanTuning& tuning) {
  MovementRun run = run_and_check(algorithm, call, tuning);
  INFO(describe(call, algorithm) << ", segments of " << tuning.segment_bytes);
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank);
    const ExpectedSends expected = expected_broadcast(algorithm.name, call, rank, tuning);
    REQUIRE(run.report.ranks[rank].bytes_sent == expected.bytes);
    REQUIRE(run.report.ranks[rank].messages_sent == expected.messages);
    REQUIRE(run.plans[rank].scratch_bytes == 0);
  }
}

void check_gather_scatter(const Algorithm& algorithm, const Call& call) {
  MovementRun run = run_and_check(algorithm, call, PlanTuning{});
  INFO(describe(call, algorithm));
  const size_t total = call.total_count() * call.element_bytes();
  size_t root_link = 0;
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank);
    const ExpectedSends expected = expected_gather_scatter(algorithm.name, call, rank);
    REQUIRE(run.report.ranks[rank].bytes_sent == expected.bytes);
    REQUIRE(run.report.ranks[rank].messages_sent == expected.messages);
    if (algorithm.name == "linear") REQUIRE(run.plans[rank].scratch_bytes == 0);
    // Binomial: a subtree's blocks (at most half of them off the root), or one wrapping range at the root.
    REQUIRE(run.plans[rank].scratch_bytes <= total);
    if (call.collective == Collective::gather ? rank != call.root : rank == call.root)
      root_link += run.report.ranks[rank].bytes_sent;
  }
  // Gathers: what arrives at the root; scatters: what leaves it. Every block but the root's own, once.
  if (call.collective == Collective::scatter || algorithm.name == "linear")
    REQUIRE(root_link == total - block_bytes(call)[call.root]);
}

}  // namespace

TEST_CASE("scatter_allgather and chain broadcast: rank counts 1..33, every root, awkward counts", "[sweep]") {
  const std::vector<const Algorithm*> broadcasts = {find_algorithm(Collective::broadcast, "scatter_allgather"),
                                                    find_algorithm(Collective::broadcast, "chain")};
  for (const Algorithm* algorithm : broadcasts) {
    REQUIRE(algorithm != nullptr);
    for (int size = 1; size <= 33; ++size)
      for (int root = 0; root < size; ++root)
        for (size_t count : awkward_counts(size)) {
          // Every root for the small counts; a spread of roots for the prime.
          if (count == 1009 && root % 4 != size % 4) continue;
          Call call = make_call(Collective::broadcast, 0, size, count, DataType::int32, ReduceOp::sum, root, true);
          check_broadcast(*algorithm, call, tiny_movement_segments);
          if (count == 1009 && root == 0) check_broadcast(*algorithm, call, PlanTuning{});
        }
  }
}

TEST_CASE("large broadcasts of other types and of 100003 elements in segments") {
  for (std::string_view name : {"scatter_allgather", "chain"}) {
    const Algorithm& algorithm = *find_algorithm(Collective::broadcast, name);
    for (DataType type : {DataType::int8, DataType::float16, DataType::float64})
      check_broadcast(algorithm, make_call(Collective::broadcast, 0, 6, 333, type, ReduceOp::sum, 4, true),
                      tiny_movement_segments);
    for (int size : {2, 7, 16})
      check_broadcast(algorithm,
                      make_call(Collective::broadcast, 0, size, 100003, DataType::float32, ReduceOp::sum, size / 2,
                                true),
                      PlanTuning{4096, 4});
  }
}

TEST_CASE("large broadcasts of 3 GiB: plans only, no scratch, each rank sends its formula") {
  const size_t count = (size_t{3} << 30) / 4;
  for (std::string_view name : {"scatter_allgather", "chain"}) {
    const Algorithm& algorithm = *find_algorithm(Collective::broadcast, name);
    for (int rank : {0, 3, 7}) {
      Call call = make_call(Collective::broadcast, rank, 8, count, DataType::float32, ReduceOp::sum, 3, true);
      const Plan plan = algorithm.build(call, PlanTuning{});
      size_t sent = 0;
      for (const Step& step : plan.steps())
        if (step.kind == StepKind::send) sent += step.from.length;
      REQUIRE(plan.scratch_bytes == 0);
      REQUIRE(sent == expected_broadcast(name, call, rank, PlanTuning{}).bytes);
    }
  }
}

TEST_CASE("gather and scatter: every algorithm, rank counts 1..33, every root, awkward counts, in and out of place", "[exhaustive]") {
  for (Collective collective : {Collective::gather, Collective::scatter}) {
    REQUIRE(algorithms_of(collective).size() == 2);
    for (const Algorithm* algorithm : algorithms_of(collective))
      for (int size = 1; size <= 33; ++size)
        for (int root = 0; root < size; ++root)
          for (size_t count : awkward_counts(size))
            for (bool in_place : {false, true}) {
              if (count == 1009 && root % 5 != size % 5) continue;
              const Call call = make_call(collective, 0, size, count, DataType::int32, ReduceOp::sum, root, in_place);
              check_gather_scatter(*algorithm, call);
            }
  }
}

TEST_CASE("gatherv and scatterv: random counts with zeros, every root") {
  std::mt19937 random(7);
  for (Collective collective : {Collective::gather, Collective::scatter})
    for (const Algorithm* algorithm : algorithms_of(collective))
      for (int size = 1; size <= 33; ++size)
        for (int root = 0; root < size; root += 1 + size / 8)
          for (int trial = 0; trial < 2; ++trial) {
            Call call = make_call(collective, 0, size, 0, DataType::int32, ReduceOp::sum, root, trial == 1);
            call.counts = random_counts(random, size, trial == 0 ? 4 : 200);
            check_gather_scatter(*algorithm, call);
            call.type = DataType::float16;
            check_gather_scatter(*algorithm, call);
          }
}

TEST_CASE("rooted selection: binomial for small blocks, linear and large broadcasts for big ones") {
  const CostModel model;
  for (Collective collective : {Collective::gather, Collective::scatter}) {
    Call call = make_call(collective, 0, 16, 4, DataType::float32, ReduceOp::sum, 3, false);
    REQUIRE(select_algorithm(call, "auto", model, {}).name == "binomial");
    call.count = 16 << 20;
    REQUIRE(select_algorithm(call, "auto", model, {}).name == "linear");
  }
  Call broadcast = make_call(Collective::broadcast, 0, 16, 16, DataType::float32, ReduceOp::sum, 5, true);
  REQUIRE(select_algorithm(broadcast, "auto", model, {}).name == "binomial");
  broadcast.count = 4 << 20;
  REQUIRE(select_algorithm(broadcast, "auto", model, {}).name != "binomial");
  broadcast.count = size_t{1} << 30;
  REQUIRE(select_algorithm(broadcast, "auto", model, {}).name == "chain");
}

TEST_CASE("rooted cost formulas") {
  CostModel model;
  model.alpha_seconds = 1e-5;
  model.beta_seconds_per_byte = 1e-9;
  model.gamma_seconds_per_byte = 0;
  Call call = make_call(Collective::broadcast, 0, 4, 1000, DataType::float32, ReduceOp::sum, 1, true);
  // scatter: 2 alpha + 3000 beta; ring allgather: 3 alpha + 3000 beta.
  REQUIRE(scatter_allgather_broadcast.cost_seconds(call, model) == Approx(5e-5 + 6000e-9));
  // 4000 bytes is one segment on any model: (P - 2 + 1) (alpha + n beta).
  REQUIRE(find_algorithm(Collective::broadcast, "chain")->cost_seconds(call, model) == Approx(3 * (1e-5 + 4000e-9)));
  Call gather = make_call(Collective::gather, 0, 4, 1000, DataType::float32, ReduceOp::sum, 1, false);
  REQUIRE(find_algorithm(Collective::gather, "linear")->cost_seconds(gather, model) == Approx(3e-5 + 12000e-9));
  REQUIRE(find_algorithm(Collective::gather, "binomial")->cost_seconds(gather, model) == Approx(2e-5 + 12000e-9));
}

TEST_CASE("signatures of gather/scatter carry the root, v variants a digest of the counts") {
  Call gather = make_call(Collective::gather, 0, 4, 10, DataType::int32, ReduceOp::sum, 1, false);
  Call other_root = gather;
  other_root.root = 2;
  REQUIRE(call_signature(gather) != call_signature(other_root));
  REQUIRE(describe_signature(call_signature(gather)) == "gather of 10 int32 from root 1 (40 bytes per rank)");

  Call gatherv = gather;
  gatherv.count = 0;
  gatherv.counts = {1, 0, 2, 3};
  Call swapped = gatherv;
  swapped.counts = {0, 1, 2, 3};  // same total, different layout
  REQUIRE(call_signature(gatherv) != call_signature(swapped));
  REQUIRE(call_signature(gatherv) != call_signature(gather));
  Call same = gatherv;
  same.rank = 3;
  REQUIRE(call_signature(same) == call_signature(gatherv));
  REQUIRE_THAT(describe_signature(call_signature(gatherv)),
               Catch::StartsWith("gatherv of int32 (per-rank counts digest 0x") && Catch::EndsWith("from root 1"));
}
