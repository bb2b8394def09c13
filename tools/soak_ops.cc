#include "tools/soak_ops.h"

#include <algorithm>
#include <cmath>

#include "algorithms/selection/registry.h"
#include "base/error.h"
#include "base/log.h"
#include "oracle/reference_data.h"

namespace chorus::soak {
namespace {

using algorithms::Collective;

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr std::string_view kind_names[] = {
    "allreduce", "broadcast", "reduce",  "allgather", "allgatherv", "reduce_scatter", "reduce_scatter_v", "gather",
    "gatherv",   "scatter",   "scatterv", "alltoall", "alltoallv",  "barrier",        "sendrecv"};
static_assert(std::size(kind_names) == kind_count);

// How often each kind comes up relative to the others (allreduce is what
// frameworks call most).
constexpr unsigned kind_weights[] = {4, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 2};
static_assert(std::size(kind_weights) == kind_count);

constexpr DataType types[] = {DataType::int8,    DataType::uint8,    DataType::int32,   DataType::uint32,
                              DataType::int64,   DataType::uint64,   DataType::float16, DataType::bfloat16,
                              DataType::float32, DataType::float64};
constexpr ReduceOp integer_ops[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                    ReduceOp::avg, ReduceOp::band, ReduceOp::bor, ReduceOp::bxor};
constexpr size_t float_op_count = 5;  // the first five: no bitwise ops on floating point

Collective collective_of(Kind kind) {
  switch (kind) {
    case Kind::allreduce: return Collective::allreduce;
    case Kind::broadcast: return Collective::broadcast;
    case Kind::reduce: return Collective::reduce;
    case Kind::allgather:
    case Kind::allgatherv: return Collective::allgather;
    case Kind::reduce_scatter:
    case Kind::reduce_scatter_v: return Collective::reduce_scatter;
    case Kind::gather:
    case Kind::gatherv: return Collective::gather;
    case Kind::scatter:
    case Kind::scatterv: return Collective::scatter;
    case Kind::alltoall:
    case Kind::alltoallv: return Collective::alltoall;
    case Kind::barrier: return Collective::barrier;
    case Kind::sendrecv: return Collective::send;
  }
  return Collective::barrier;
}

bool reduces(Collective collective) {
  return collective == Collective::allreduce || collective == Collective::reduce ||
         collective == Collective::reduce_scatter;
}

bool allows_in_place(Collective collective) {
  return collective != Collective::alltoall && collective != Collective::barrier &&
         collective != Collective::broadcast;
}

// A count of at most `max`: mostly log-uniform, sometimes 0, 1 or a count
// near the number of ranks (blocks of 0 or 1 elements per rank).
size_t draw_count(Random& random, size_t max, int ranks) {
  if (max == 0) return 0;
  switch (random.below(16)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return std::min<size_t>(max, random.below(2 * static_cast<uint64_t>(ranks) + 2));
    default: return random.log_uniform(max);
  }
}

Kind draw_kind(Random& random, const Limits& limits, int size) {
  unsigned total = 0;
  for (Kind kind : limits.kinds)
    if (kind != Kind::sendrecv || size > 1) total += kind_weights[static_cast<size_t>(kind)];
  if (total == 0) return Kind::barrier;  // only sendrecv asked for, on one rank
  uint64_t pick = random.below(total);
  for (Kind kind : limits.kinds) {
    if (kind == Kind::sendrecv && size <= 1) continue;
    const unsigned weight = kind_weights[static_cast<size_t>(kind)];
    if (pick < weight) return kind;
    pick -= weight;
  }
  return Kind::barrier;
}

std::string pick_algorithm(Random& random, const oracle::Case& test, const GroupShape& shape) {
  std::vector<std::string_view> candidates;
  for (const algorithms::Algorithm& algorithm : algorithms::all_algorithms()) {
    if (algorithm.collective != test.call.collective) continue;
    const oracle::Support support = oracle::algorithm_support(algorithm, test, shape.topology);
    if (support == oracle::Support::some)
      throw InvalidArgument(cat("chorus-soak: ", oracle::describe(test), ": algorithm ", algorithm.name,
                                " serves the call on some ranks of ", shape.size, " but not on others"));
    if (support == oracle::Support::all) candidates.push_back(algorithm.name);
  }
  // auto a quarter of the time (and whenever no algorithm can be named).
  const bool automatic = random.chance(0.25);
  const uint64_t index = random.below(candidates.size());
  if (automatic || candidates.empty()) return "auto";
  return std::string(candidates[index]);
}

}  // namespace

Random::Random(uint64_t seed, uint64_t stream, uint64_t substream)
    : state_(mix(mix(mix(seed) ^ stream) ^ substream)) {}

uint64_t Random::next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Random::below(uint64_t n) { return n == 0 ? 0 : next() % n; }

double Random::unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

bool Random::chance(double probability) { return unit() < probability; }

size_t Random::log_uniform(size_t max) {
  if (max == 0) return 0;
  const double bits = std::log2(static_cast<double>(max) + 1.0);
  const auto value = static_cast<size_t>(std::exp2(unit() * bits));
  return std::clamp<size_t>(value, 1, max);
}

std::string_view to_string(Kind kind) { return kind_names[static_cast<size_t>(kind)]; }

std::vector<Kind> all_kinds() {
  std::vector<Kind> kinds;
  for (size_t i = 0; i < kind_count; ++i) kinds.push_back(static_cast<Kind>(i));
  return kinds;
}

std::vector<Kind> parse_kinds(const std::string& text) {
  if (text == "all") return all_kinds();
  std::vector<Kind> kinds;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view name(text.data() + start, comma - start);
    const auto found = std::find(std::begin(kind_names), std::end(kind_names), name);
    if (found == std::end(kind_names)) {
      std::string valid;
      for (std::string_view known : kind_names) valid += cat(valid.empty() ? "" : ", ", known);
      throw InvalidArgument(cat("unknown collective '", name, "' (valid: ", valid, ", all)"));
    }
    const auto kind = static_cast<Kind>(found - std::begin(kind_names));
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
    start = comma + 1;
  }
  return kinds;
}

GroupShape shape_of(const Context& context) {
  GroupShape shape;
  shape.rank = context.rank();
  shape.size = context.size();
  std::vector<int> host_of(static_cast<size_t>(shape.size));
  for (int rank = 0; rank < shape.size; ++rank) host_of[static_cast<size_t>(rank)] = context.host_of(rank);
  shape.topology = std::make_shared<const Topology>(host_of);
  return shape;
}

Operation make_operation(uint64_t seed, uint64_t step, uint64_t index, const GroupShape& shape,
                         const Limits& limits) {
  // Substream 0 of a step is the step's own generator (chorus_soak.cc).
  Random random(seed, step, index + 1);
  Operation operation;
  operation.kind = draw_kind(random, limits, shape.size);
  const DataType type = types[random.below(std::size(types))];
  const size_t element = element_size(type);
  const auto ranks = static_cast<size_t>(shape.size);
  const size_t max_elements = limits.max_bytes / element;
  const size_t max_block = max_elements / ranks;

  if (operation.kind == Kind::sendrecv) {
    RingExchange& ring = operation.ring;
    ring.shift = 1 + static_cast<int>(random.below(ranks - 1));
    ring.count = draw_count(random, max_elements, shape.size);
    ring.type = type;
    ring.tag = static_cast<uint32_t>(step * 16 + index);
    ring.mode = static_cast<int>(random.below(3));
    ring.salt = random.below(1 << 16);
    operation.payload_bytes = ring.count * element;
    return operation;
  }

  const Collective collective = collective_of(operation.kind);
  const ReduceOp op = is_floating_point(type) ? integer_ops[random.below(float_op_count)]
                                              : integer_ops[random.below(std::size(integer_ops))];
  const int root = static_cast<int>(random.below(ranks));
  oracle::Case& test = operation.test;
  test.call = algorithms::make_call(collective, shape.rank, shape.size, 0, type, op, root, false);
  algorithms::Call& call = test.call;
  switch (operation.kind) {
    case Kind::allreduce:
    case Kind::broadcast:
    case Kind::reduce:
      call.count = draw_count(random, max_elements, shape.size);
      operation.payload_bytes = call.count * element;
      break;
    case Kind::allgather:
    case Kind::reduce_scatter:
    case Kind::gather:
    case Kind::scatter:
    case Kind::alltoall:
      call.count = draw_count(random, max_block, shape.size);
      operation.payload_bytes = call.count * ranks * element;
      break;
    case Kind::allgatherv:
    case Kind::reduce_scatter_v:
    case Kind::gatherv:
    case Kind::scatterv:
      call.counts.resize(ranks);
      for (size_t& count : call.counts) count = random.chance(0.25) ? 0 : draw_count(random, max_block, shape.size);
      operation.payload_bytes = call.total_count() * element;
      break;
    case Kind::alltoallv: {
      // oracle::alltoallv_count: rank `from` sends 0, 1 or 2 times (scale + 1) to each peer.
      const size_t most = max_block / 2;
      call.count = draw_count(random, most == 0 ? 0 : most - 1, shape.size);
      call.send_counts = {1};  // marks alltoallv (oracle/collective_cases.h)
      call.recv_counts = {1};
      size_t total = 0;
      for (int from = 0; from < shape.size; ++from)
        for (int to = 0; to < shape.size; ++to) total += oracle::alltoallv_count(from, to, call.count);
      operation.payload_bytes = total / ranks * element;  // one rank's buffer, on average
      break;
    }
    case Kind::barrier:
    case Kind::sendrecv: break;
  }
  if (!reduces(collective)) call.op = ReduceOp::sum;  // op means nothing there; keep descriptions short
  call.in_place = allows_in_place(collective) && random.chance(0.25);
  test.async = random.chance(0.25);
  test.typed = type == DataType::float32 && random.chance(1.0 / 3);
  // The typed forms have no in-place gather or scatter (the root's span
  // would mean something else than the others').
  if (test.typed && call.in_place && (collective == Collective::gather || collective == Collective::scatter))
    test.typed = false;
  test.salt = random.below(1 << 16);
  test.algorithm = pick_algorithm(random, test, shape);
  return operation;
}

std::string describe(const Operation& operation) {
  if (operation.kind != Kind::sendrecv) return oracle::describe(operation.test);
  const RingExchange& ring = operation.ring;
  static constexpr std::string_view modes[] = {"send then recv", "recv_async, send, wait", "send_async, recv_async"};
  return cat("sendrecv shift ", ring.shift, " count ", ring.count, " ", chorus::to_string(ring.type), " tag ", ring.tag,
             " (", modes[ring.mode], ") salt ", ring.salt);
}

}  // namespace chorus::soak
