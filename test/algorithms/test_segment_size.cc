// Pipeline segments chosen from the link model: the choice itself (shrinks
// on a link that moves few bytes per alpha, grows with the buffer and on fast
// links, stays within its bounds, whole elements, under 2^32 messages), and
// chain broadcast's cost counting exactly the segments its Plan then sends.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "algorithms/model/block_layout.h"
#include "algorithms/plans/broadcast/chain_broadcast.h"
#include "algorithms/selection/registry.h"
#include "algorithms/model/segment_size.h"
#include "algorithms/selection/selection.h"
#include "test/algorithms/movement_check.h"

using namespace chorus;
using namespace chorus::algorithms;
using namespace chorus::algorithms::testing;

namespace {

CostModel link(double alpha_us, double gigabytes_per_second) {
  CostModel model;
  model.alpha_seconds = alpha_us * 1e-6;
  model.beta_seconds_per_byte = 1.0 / (gigabytes_per_second * 1e9);
  return model;
}

// A 1 Gbit/s Ethernet, the transport's network and same-host defaults, and a
// model whose alpha is nearly free.
const CostModel gigabit = link(50, 0.125);
const CostModel network = link(50, 1.1);
const CostModel same_host = link(70, 2.0);
const CostModel cheap_alpha = link(1, 0.125);

constexpr size_t KiB = 1024, MiB = 1024 * 1024;

bool is_power_of_two(size_t value) { return value != 0 && (value & (value - 1)) == 0; }

}  // namespace

TEST_CASE("pipeline segments: sqrt(n alpha / (F beta)) rounded down to a power of two, within bounds") {
  // sqrt(4 MiB * 50 us * 0.125 GB/s / 2) = 114 KiB -> 64 KiB; on the
  // transport's default network model 340 KiB -> 256 KiB.
  REQUIRE(pipeline_segment_bytes(4 * MiB, 4, 2, gigabit) == 64 * KiB);
  REQUIRE(pipeline_segment_bytes(4 * MiB, 4, 2, network) == 256 * KiB);
  // 64 MiB on the same-host model: 2.07 MiB -> 2 MiB.
  REQUIRE(pipeline_segment_bytes(64 * MiB, 4, 2, same_host) == 2 * MiB);
  // An optimum of exactly 64 KiB is kept; a hair less is 32 KiB.
  CostModel exact;
  exact.alpha_seconds = 64.0 * KiB * 64.0 * KiB;
  exact.beta_seconds_per_byte = 1;
  REQUIRE(pipeline_segment_bytes(1, 1, 1, exact) == 64 * KiB);
  exact.alpha_seconds *= 0.999;
  REQUIRE(pipeline_segment_bytes(1, 1, 1, exact) == 32 * KiB);

  REQUIRE(pipeline_segment_bytes(4 * MiB, 4, 2, cheap_alpha) == min_pipeline_segment_bytes);
  REQUIRE(pipeline_segment_bytes(size_t{1} << 40, 4, 2, same_host) == max_pipeline_segment_bytes);
  // No fill to shorten (a chain of two): one alpha per segment buys nothing.
  REQUIRE(pipeline_segment_bytes(4 * MiB, 4, 0, gigabit) == max_pipeline_segment_bytes);
  CostModel free_bandwidth = gigabit;
  free_bandwidth.beta_seconds_per_byte = 0;
  REQUIRE(pipeline_segment_bytes(4 * MiB, 4, 2, free_bandwidth) == max_pipeline_segment_bytes);
}

TEST_CASE("pipeline segments shrink on slow links, cheap alphas and long fills; grow with the buffer") {
  for (size_t bytes = 64 * KiB; bytes <= (size_t{1} << 34); bytes *= 2) {
    INFO(bytes << " bytes");
    const size_t base = pipeline_segment_bytes(bytes, 4, 2, network);
    REQUIRE(is_power_of_two(base));
    REQUIRE(base >= min_pipeline_segment_bytes);
    REQUIRE(base <= max_pipeline_segment_bytes);
    REQUIRE(pipeline_segment_bytes(bytes, 4, 2, gigabit) <= base);      // slower link
    REQUIRE(pipeline_segment_bytes(bytes, 4, 2, link(5, 1.1)) <= base);  // cheaper alpha
    REQUIRE(pipeline_segment_bytes(bytes, 4, 6, network) <= base);      // longer chain
    REQUIRE(pipeline_segment_bytes(bytes, 4, 2, same_host) >= base);    // more bytes per alpha
    REQUIRE(pipeline_segment_bytes(2 * bytes, 4, 2, network) >= base);
  }
  // Strictly, away from the bounds: 16x the buffer or the bytes per alpha is
  // 4x the segment, 4x the fill half of it.
  REQUIRE(pipeline_segment_bytes(16 * MiB, 4, 2, gigabit) == 4 * pipeline_segment_bytes(MiB, 4, 2, gigabit));
  REQUIRE(pipeline_segment_bytes(4 * MiB, 4, 2, link(50, 2.0)) == 4 * pipeline_segment_bytes(4 * MiB, 4, 2, gigabit));
  REQUIRE(pipeline_segment_bytes(4 * MiB, 4, 8, gigabit) * 2 == pipeline_segment_bytes(4 * MiB, 4, 2, gigabit));
}

TEST_CASE("pipeline segments: whole elements, and never 2^32 messages") {
  for (size_t element : {size_t{1}, size_t{2}, size_t{8}, size_t{12}, size_t{24 * 1024}}) {
    INFO("element of " << element << " bytes");
    for (const CostModel& model : {gigabit, network, same_host, cheap_alpha}) {
      const size_t segment = pipeline_segment_bytes(64 * MiB, element, 2, model);
      REQUIRE(segment % element == 0);
      REQUIRE(segment > 0);
    }
  }
  // 2^32 segments of the largest size would be one message too many.
  const size_t huge = (size_t{1} << 32) * max_pipeline_segment_bytes + 8;
  const size_t segment = pipeline_segment_bytes(huge, 8, 2, same_host);
  REQUIRE(segment % 8 == 0);
  REQUIRE(segment_count(huge, segment) <= std::numeric_limits<uint32_t>::max());
}

TEST_CASE("chain broadcast: selection's cost counts exactly the segments of the Plan that runs", "[sweep]") {
  const Algorithm& chain = *find_algorithm(Collective::broadcast, "chain");
  for (const CostModel& model : {gigabit, network, same_host, cheap_alpha})
    for (int size : {2, 3, 4, 7})
      for (size_t count : {size_t{1}, size_t{1000}, (size_t{1} << 20) + 3, size_t{3} << 20}) {
        const Call call = make_call(Collective::broadcast, 0, size, count, DataType::float32, ReduceOp::sum,
                                    size - 1, true);
        INFO(describe(call, chain) << ", alpha " << model.alpha_seconds << " s, beta "
                                   << model.beta_seconds_per_byte << " s/B");
        const PlanTuning tuning = plan_tuning(chain, call, model);
        // Every rank derives the same segments, or their Plans would not match.
        for (int rank = 0; rank < size; ++rank) {
          Call other = call;
          other.rank = rank;
          REQUIRE(plan_tuning(chain, other, model).segment_bytes == tuning.segment_bytes);
        }
        const MovementRun run = run_and_check(chain, call, tuning);
        const size_t root_messages = run.report.ranks[static_cast<size_t>(call.root)].messages_sent;
        REQUIRE(root_messages == segment_count(call.bytes(), segment_bytes_of(tuning, call.element_bytes())));
        const double segments = static_cast<double>(root_messages);
        const double expected = (size - 2 + segments) *
                                (model.alpha_seconds +
                                 static_cast<double>(call.bytes()) / segments * model.beta_seconds_per_byte);
        REQUIRE(chain.cost_seconds(call, model) == Approx(expected));
      }
}

TEST_CASE("chain broadcast on a gigabit link: smaller segments than the default, and a cheaper prediction") {
  const Algorithm& chain = *find_algorithm(Collective::broadcast, "chain");
  const Call call = make_call(Collective::broadcast, 0, 4, MiB, DataType::float32, ReduceOp::sum, 0, true);
  REQUIRE(select_algorithm(call, "auto", gigabit, {}).name == "chain");
  const size_t chosen = plan_tuning(chain, call, gigabit).segment_bytes;
  REQUIRE(chosen < PlanTuning{}.segment_bytes);
  // (P - 2 + S) (alpha + n beta / S) with the default's 8 segments.
  const double bytes = static_cast<double>(call.bytes());
  const double with_default = (2 + 8) * (gigabit.alpha_seconds + bytes / 8 * gigabit.beta_seconds_per_byte);
  REQUIRE(chain.cost_seconds(call, gigabit) < 0.95 * with_default);
  // The same buffer on the same-host model keeps large segments.
  REQUIRE(plan_tuning(chain, call, same_host).segment_bytes >= PlanTuning{}.segment_bytes);
}
