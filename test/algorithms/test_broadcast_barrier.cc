// Binomial broadcast and dissemination barrier checked in the simulator.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <tuple>

#include "algorithms/plans/broadcast/binomial_broadcast.h"
#include "algorithms/plans/barrier/dissemination_barrier.h"
#include "test/algorithms/job_buffers.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

int64_t root_value(size_t i) { return static_cast<int64_t>(i % 101) - 50; }

void check_broadcast(const Call& call, const PlanTuning& tuning) {
  INFO(to_string(call.type) << " count " << call.count << " on " << call.size << " ranks from root " << call.root
                            << ", segments of " << tuning.segment_bytes << " bytes");
  const std::vector<Plan> plans = build_plans(binomial_broadcast.build, call, tuning);
  // Only the root holds the data; everyone else starts with garbage.
  JobBuffers job = JobBuffers::make(call, [&](int rank, size_t i) { return rank == call.root ? root_value(i) : 99; });
  SimulationReport report = simulate(plans, job.views(), call);
  const std::vector<std::byte> expected = expected_bytes(call, root_value);
  size_t total_sent = 0;
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank);
    REQUIRE(job.outputs[rank] == expected);
    REQUIRE(plans[rank].scratch_bytes == 0);
    total_sent += report.ranks[rank].bytes_sent;
  }
  // Every rank but the root receives the buffer exactly once.
  REQUIRE(total_sent == static_cast<size_t>(call.size - 1) * call.bytes());
  // The root sends the whole buffer to each of its ceil(log2 P) children.
  REQUIRE(report.ranks[call.root].bytes_sent == static_cast<size_t>(ceil_log2(call.size)) * call.bytes());
}

}  // namespace

TEST_CASE("binomial broadcast from every root on 1..16 and a few larger rank counts") {
  std::vector<int> sizes;
  for (int size = 1; size <= 16; ++size) sizes.push_back(size);
  for (int size : {23, 33}) sizes.push_back(size);
  for (int size : sizes)
    for (int root = 0; root < size; ++root)
      for (size_t count : {size_t{0}, size_t{1}, size_t{2}, static_cast<size_t>(size - 1),
                           static_cast<size_t>(size + 1), size_t{1009}}) {
        check_broadcast(make_call(Collective::broadcast, 0, size, count, DataType::int32, ReduceOp::sum, root, true),
                        PlanTuning{64, 4});
        if (count == 1009 && root % 3 == 0) {
          check_broadcast(make_call(Collective::broadcast, 0, size, count, DataType::int8, ReduceOp::sum, root, true),
                          PlanTuning{});
          check_broadcast(make_call(Collective::broadcast, 0, size, count, DataType::float16, ReduceOp::sum, root, true),
                          PlanTuning{100, 4});
        }
      }
}

TEST_CASE("binomial broadcast of 100003 float32 in segments") {
  for (int size : {2, 5, 16}) {
    Call call = make_call(Collective::broadcast, 0, size, 100003, DataType::float32, ReduceOp::sum, size - 1, true);
    check_broadcast(call, PlanTuning{4096, 4});
    check_broadcast(call, PlanTuning{call.bytes(), 4});
  }
}

namespace {

// A rank r "heard from" rank q if some step of q happens before r's last
// step, following dependencies inside a rank and messages between ranks.
// A barrier is correct when every rank heard from every other.
std::vector<std::set<int>> heard_from(const std::vector<Plan>& plans) {
  const int size = static_cast<int>(plans.size());
  std::map<std::tuple<int, int, uint32_t>, std::pair<int, StepId>> senders;  // (src, dst, slot) -> send step
  for (int rank = 0; rank < size; ++rank)
    for (StepId id = 0; id < plans[rank].size(); ++id) {
      const Step& step = plans[rank].step(id);
      if (step.kind == StepKind::send) senders[{rank, step.peer, step.slot}] = {rank, id};
    }
  // Steps are in topological order per rank, but a recv may depend on a
  // later-numbered step of another rank, so iterate to a fixed point.
  std::vector<std::vector<std::set<int>>> known(size);
  for (int rank = 0; rank < size; ++rank) known[rank].assign(plans[rank].size(), std::set<int>{rank});
  for (bool changed = true; changed;) {
    changed = false;
    for (int rank = 0; rank < size; ++rank)
      for (StepId id = 0; id < plans[rank].size(); ++id) {
        const Step& step = plans[rank].step(id);
        std::set<int> merged = known[rank][id];
        for (StepId dependency : plans[rank].dependencies(step))
          merged.insert(known[rank][dependency].begin(), known[rank][dependency].end());
        if (step.kind == StepKind::recv) {
          auto [sender, send_id] = senders.at({step.peer, rank, step.slot});
          merged.insert(known[sender][send_id].begin(), known[sender][send_id].end());
        }
        if (merged != known[rank][id]) {
          known[rank][id] = std::move(merged);
          changed = true;
        }
      }
  }
  std::vector<std::set<int>> result(size);
  for (int rank = 0; rank < size; ++rank) {
    result[rank].insert(rank);
    for (const auto& step_known : known[rank]) result[rank].insert(step_known.begin(), step_known.end());
  }
  return result;
}

}  // namespace

TEST_CASE("dissemination barrier: log2 rounds of empty messages, every rank hears from every rank") {
  for (int size = 1; size <= 40; ++size) {
    INFO("size " << size);
    Call call = make_call(Collective::barrier, 0, size, 0, DataType::int8, ReduceOp::sum, 0, true);
    const std::vector<Plan> plans = build_plans(dissemination_barrier.build, call, PlanTuning{});
    std::vector<RankBuffers> nothing(size);
    SimulationReport report = simulate(plans, nothing, call);
    for (int rank = 0; rank < size; ++rank) {
      REQUIRE(report.ranks[rank].messages_sent == static_cast<size_t>(ceil_log2(size)));
      REQUIRE(report.ranks[rank].bytes_sent == 0);
    }
    for (const std::set<int>& heard : heard_from(plans)) REQUIRE(heard.size() == static_cast<size_t>(size));
  }
}

TEST_CASE("a plan that skips a round is caught by the barrier check") {
  // Guard the checker itself: without the dependency between rounds, a rank
  // hears only from its immediate predecessors.
  const int size = 8;
  std::vector<Plan> plans(size);
  for (int rank = 0; rank < size; ++rank)
    for (int round = 0; round < 3; ++round) {
      plans[rank].send(Region{}, (rank + (1 << round)) % size, round);
      plans[rank].recv((rank - (1 << round) + size) % size, round, Region{});
    }
  bool everyone_heard_everyone = true;
  for (const std::set<int>& heard : heard_from(plans)) everyone_heard_everyone &= heard.size() == size;
  REQUIRE_FALSE(everyone_heard_everyone);
}
