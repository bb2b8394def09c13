// What chorus-soak runs: a pseudo-random sequence of collectives that every
// rank derives from the same seed, so the ranks agree on every call without
// talking about it. Each operation has its own generator (seed, step,
// operation), so ranks of different split groups, which draw different
// amounts, never fall out of step.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/topology.h"
#include "base/types.h"
#include "chorus/context.h"
#include "oracle/collective_cases.h"

namespace chorus::soak {

// splitmix64: small, fast, the same on every platform.
class Random {
 public:
  Random(uint64_t seed, uint64_t stream, uint64_t substream);
  uint64_t next();
  // Uniform in [0, n); 0 when n is 0.
  uint64_t below(uint64_t n);
  bool chance(double probability);
  // Uniform in [0, 1).
  double unit();
  // 0..max, log-uniform (as many draws in 1..2 as in 512..1024), so small
  // and odd counts come as often as large ones.
  size_t log_uniform(size_t max);

 private:
  uint64_t state_;
};

enum class Kind : uint8_t {
  allreduce, broadcast, reduce, allgather, allgatherv, reduce_scatter, reduce_scatter_v, gather, gatherv,
  scatter, scatterv, alltoall, alltoallv, barrier, sendrecv,
};
inline constexpr size_t kind_count = static_cast<size_t>(Kind::sendrecv) + 1;
std::string_view to_string(Kind kind);
std::vector<Kind> all_kinds();
// Parses "allreduce,gatherv,sendrecv" (or "all"); throws InvalidArgument.
std::vector<Kind> parse_kinds(const std::string& text);

// The shape of the group an operation runs on, as every member sees it.
struct GroupShape {
  int rank = 0;
  int size = 1;
  std::shared_ptr<const Topology> topology;
};
GroupShape shape_of(const Context& context);

struct Limits {
  // The largest buffer of any call (a block collective's whole side).
  size_t max_bytes = 4 << 20;
  std::vector<Kind> kinds = all_kinds();
};

// One point-to-point exchange round a ring: every rank sends to
// rank + shift and receives from rank - shift.
struct RingExchange {
  int shift = 1;
  size_t count = 0;
  DataType type = DataType::float32;
  uint32_t tag = 0;
  // 0: send, then recv (blocking); 1: recv_async, send, wait; 2: both async.
  int mode = 0;
  size_t salt = 0;
};

struct Operation {
  Kind kind = Kind::allreduce;
  oracle::Case test;   // every kind but sendrecv
  RingExchange ring;   // sendrecv
  // The collective's data size (nccl-tests "size": the whole buffer, or
  // all blocks together; one message for sendrecv), for the byte count.
  size_t payload_bytes = 0;
};

// The operation number `index` of step `step`, for a group of this shape.
// Throws InvalidArgument if an algorithm would serve the call on some of the
// group's ranks but not on others (that would be a library bug).
Operation make_operation(uint64_t seed, uint64_t step, uint64_t index, const GroupShape& shape,
                         const Limits& limits);

// "gatherv binomial count 0 int8 root 2 counts 0 7 1 3 in place async salt 12"
std::string describe(const Operation& operation);

}  // namespace chorus::soak
