// chorus-soak's sequence (tools/soak_ops.h): the same on every rank of a
// group, different per seed, within --max-bytes, only algorithms that serve
// the call, and every kind, type and op where the collective allows it.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "algorithms/selection/registry.h"
#include "base/error.h"
#include "base/log.h"
#include "oracle/reference_data.h"
#include "tools/soak_ops.h"

using namespace chorus;
using namespace chorus::soak;

namespace {

GroupShape shape(int rank, const std::vector<int>& host_of) {
  GroupShape group;
  group.rank = rank;
  group.size = static_cast<int>(host_of.size());
  group.topology = std::make_shared<const Topology>(host_of);
  return group;
}

// The buffers of this rank, in bytes (the largest must stay within max_bytes).
size_t largest_buffer(const Operation& operation) {
  if (operation.kind == Kind::sendrecv) return operation.ring.count * element_size(operation.ring.type);
  const algorithms::Call call = oracle::library_call(operation.test);
  return std::max(algorithms::input_bytes(call), algorithms::output_bytes(call));
}

}  // namespace

TEST_CASE("soak: every rank of a group derives the same calls from the seed", "[soak]") {
  const std::vector<int> two_hosts = {0, 0, 1, 1};
  Limits limits;
  limits.max_bytes = 1 << 20;
  for (uint64_t step = 0; step < 300; ++step) {
    for (uint64_t index = 0; index < 3; ++index) {
      const Operation first = make_operation(7, step, index, shape(0, two_hosts), limits);
      for (int rank = 1; rank < 4; ++rank) {
        const Operation other = make_operation(7, step, index, shape(rank, two_hosts), limits);
        // Only the rank differs, so the descriptions (which leave it out) agree.
        REQUIRE(describe(other) == describe(first));
        REQUIRE(other.payload_bytes == first.payload_bytes);
      }
    }
  }
  // Another seed, another sequence.
  int same = 0;
  for (uint64_t step = 0; step < 100; ++step)
    same += describe(make_operation(7, step, 0, shape(0, two_hosts), limits)) ==
            describe(make_operation(8, step, 0, shape(0, two_hosts), limits));
  CHECK(same < 10);
}

TEST_CASE("soak: calls stay within max_bytes and name algorithms that serve them", "[soak]") {
  const std::vector<std::vector<int>> topologies = {{0}, {0, 0, 0}, {0, 0, 1, 1}, {0, 1, 0, 1, 2}};
  for (const std::vector<int>& host_of : topologies) {
    for (size_t max_bytes : {size_t{0}, size_t{100}, size_t{64} << 10}) {
      Limits limits;
      limits.max_bytes = max_bytes;
      for (uint64_t step = 0; step < 400; ++step) {
        for (int rank = 0; rank < static_cast<int>(host_of.size()); ++rank) {
          const GroupShape group = shape(rank, host_of);
          const Operation operation = make_operation(3, step, 0, group, limits);
          INFO(describe(operation) << " on " << host_of.size() << " ranks, max " << max_bytes);
          if (operation.kind == Kind::sendrecv) {
            REQUIRE(group.size > 1);
            REQUIRE(operation.ring.shift >= 1);
            REQUIRE(operation.ring.shift < group.size);
          }
          // alltoallv moves up to 2 (scale + 1) elements per peer: a little over at tiny limits.
          const size_t slack = operation.kind == Kind::alltoallv ? 2 * host_of.size() * 8 : 0;
          REQUIRE(largest_buffer(operation) <= max_bytes + slack);
          if (operation.kind == Kind::sendrecv || operation.test.algorithm == "auto") continue;
          const algorithms::Algorithm* algorithm =
              algorithms::find_algorithm(operation.test.call.collective, operation.test.algorithm);
          REQUIRE(algorithm != nullptr);
          REQUIRE(oracle::algorithm_support(*algorithm, operation.test, group.topology) == oracle::Support::all);
        }
      }
    }
  }
}

TEST_CASE("soak: the sequence covers every kind, type, op and form", "[soak]") {
  Limits limits;
  limits.max_bytes = 1 << 16;
  std::set<std::string> kinds, types, ops, named;
  int async = 0, in_place = 0, typed = 0, bitwise_on_float = 0;
  const std::vector<int> two_hosts = {0, 0, 1, 1};
  for (uint64_t step = 0; step < 5000; ++step) {
    const Operation operation = make_operation(1, step, 0, shape(0, two_hosts), limits);
    kinds.insert(std::string(to_string(operation.kind)));
    if (operation.kind == Kind::sendrecv) continue;
    const oracle::Case& test = operation.test;
    types.insert(std::string(to_string(test.call.type)));
    ops.insert(std::string(to_string(test.call.op)));
    named.insert(cat(algorithms::to_string(test.call.collective), "/", test.algorithm));
    async += test.async;
    in_place += test.call.in_place;
    typed += test.typed;
    const bool bitwise = test.call.op == ReduceOp::band || test.call.op == ReduceOp::bor ||
                         test.call.op == ReduceOp::bxor;
    bitwise_on_float += bitwise && is_floating_point(test.call.type);
  }
  CHECK(kinds.size() == kind_count);
  CHECK(types.size() == 10);
  CHECK(ops.size() == 8);
  CHECK(bitwise_on_float == 0);
  CHECK(async > 0);
  CHECK(in_place > 0);
  CHECK(typed > 0);
  // Every algorithm of the registry (two hosts: the hierarchical ones too), and auto.
  for (const algorithms::Algorithm& algorithm : algorithms::all_algorithms())
    CHECK(named.count(cat(algorithms::to_string(algorithm.collective), "/", algorithm.name)) == 1);
  CHECK(named.count("allreduce/auto") == 1);
}

TEST_CASE("soak: --collectives parses names and rejects unknown ones", "[soak]") {
  CHECK(parse_kinds("all").size() == kind_count);
  const std::vector<Kind> some = parse_kinds("gatherv,sendrecv,gatherv");
  REQUIRE(some.size() == 2);
  CHECK(some[0] == Kind::gatherv);
  CHECK(some[1] == Kind::sendrecv);
  CHECK_THROWS_AS(parse_kinds("allreduce,allgatherw"), InvalidArgument);
  CHECK_THROWS_AS(parse_kinds(""), InvalidArgument);
}
