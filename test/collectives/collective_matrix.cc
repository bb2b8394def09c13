#include "test/collectives/collective_matrix.h"

#include <algorithm>
#include <memory>

#include "algorithms/selection/registry.h"
#include "base/log.h"
#include "base/topology.h"
#include "oracle/collective_cases.h"

namespace chorus::collective_test {
namespace {

using oracle::algorithm_support;
using oracle::Case;
using oracle::describe;
using oracle::run_case;
using oracle::Support;

using algorithms::Algorithm;
using algorithms::Collective;

bool is_rooted(Collective collective) {
  return collective == Collective::broadcast || collective == Collective::reduce || collective == Collective::gather ||
         collective == Collective::scatter;
}

bool reduces(Collective collective) {
  return collective == Collective::allreduce || collective == Collective::reduce ||
         collective == Collective::reduce_scatter;
}

bool has_v_variant(Collective collective) {
  return collective == Collective::reduce_scatter || collective == Collective::allgather ||
         collective == Collective::gather || collective == Collective::scatter || collective == Collective::alltoall;
}

bool has_in_place(Collective collective) {
  return collective != Collective::alltoall && collective != Collective::barrier &&
         collective != Collective::broadcast;
}

// Large enough to be cut into several pipeline segments (512 KiB) when the
// count is the whole buffer, small enough for 8 processes on 2 cores.
size_t large_count(Collective collective) {
  switch (collective) {
    case Collective::allreduce:
    case Collective::broadcast:
    case Collective::reduce: return 300007;
    default: return 40009;  // per rank block
  }
}

class CaseList {
 public:
  CaseList(const Algorithm& algorithm, int rank, int size) : algorithm_(algorithm), rank_(rank), size_(size) {}

  Case& add(size_t count, DataType type = DataType::float32, ReduceOp op = ReduceOp::sum, int root = 0) {
    Case test;
    test.call = algorithms::make_call(algorithm_.collective, rank_, size_, count, type, op, root, false);
    test.algorithm = std::string(algorithm_.name);
    cases_.push_back(test);
    return cases_.back();
  }
  std::vector<Case>& cases() { return cases_; }

 private:
  const Algorithm& algorithm_;
  int rank_;
  int size_;
  std::vector<Case> cases_;
};

std::vector<size_t> variable_counts(int size, size_t base, int pattern) {
  std::vector<size_t> counts(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    size_t count = 0;
    if (pattern == 0) count = (r % 3 == 1) ? 0 : base + 3 * static_cast<size_t>(r);
    if (pattern == 1) count = r == size - 1 ? base : 0;  // all but one empty
    if (pattern == 2) count = 0;                          // everything empty
    counts[static_cast<size_t>(r)] = count;
  }
  return counts;
}

std::vector<Case> cases_for(const Algorithm& algorithm, int rank, int size) {
  const Collective collective = algorithm.collective;
  CaseList list(algorithm, rank, size);
  if (collective == Collective::barrier) {
    list.add(0);
    list.add(0).async = true;
    return list.cases();
  }
  const auto ranks = static_cast<size_t>(size);
  const size_t counts[] = {0, 1, 2, ranks - 1, ranks + 1, 13, large_count(collective)};
  for (size_t count : counts) {
    const int root = is_rooted(collective) ? static_cast<int>(count % ranks) : 0;
    list.add(count, DataType::float32, ReduceOp::sum, root);
    if (has_in_place(collective) && (count == 13 || count == large_count(collective)))
      list.add(count, DataType::float32, ReduceOp::sum, size - 1 - root).call.in_place = true;
  }
  // Every type, and every op where the collective reduces.
  if (reduces(collective)) {
    const std::pair<DataType, ReduceOp> typed_ops[] = {
        {DataType::int32, ReduceOp::max},    {DataType::bfloat16, ReduceOp::sum}, {DataType::float16, ReduceOp::avg},
        {DataType::int64, ReduceOp::prod},   {DataType::uint8, ReduceOp::min},    {DataType::float64, ReduceOp::sum},
        {DataType::int8, ReduceOp::bxor},    {DataType::uint32, ReduceOp::band},  {DataType::uint64, ReduceOp::bor},
        {DataType::float32, ReduceOp::avg}};
    int root = 0;
    for (auto [type, op] : typed_ops) list.add(1001, type, op, root++ % size);
  } else {
    const DataType types[] = {DataType::int8, DataType::float16, DataType::int64, DataType::float64,
                              DataType::bfloat16};
    int root = 0;
    for (DataType type : types) list.add(37, type, ReduceOp::sum, root++ % size);
  }
  // Every root at odd sizes, the first and last elsewhere; in place on root too.
  if (is_rooted(collective)) {
    for (int root = 0; root < size; ++root) {
      if (size > 5 && root != 0 && root != size - 1) continue;
      list.add(29, DataType::float32, ReduceOp::sum, root);
      if (has_in_place(collective)) list.add(29, DataType::int32, ReduceOp::max, root).call.in_place = true;
    }
  }
  // v variants, zeros included.
  if (has_v_variant(collective)) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      if (collective == Collective::alltoall) {
        Case& test = list.add(pattern == 2 ? 0 : 5 + static_cast<size_t>(pattern) * 1000);
        test.call.send_counts = {1};  // marks alltoallv: counts follow alltoallv_count
        test.call.recv_counts = {1};
        continue;
      }
      const int root = pattern % size;
      Case& test = list.add(0, DataType::float32, ReduceOp::sum, root);
      test.call.counts = variable_counts(size, pattern == 0 ? 5 : 3001, pattern);
      if (has_in_place(collective)) {
        Case& in_place = list.add(0, DataType::int32, ReduceOp::sum, size - 1);
        in_place.call.counts = variable_counts(size, 7, pattern);
        in_place.call.in_place = true;
      }
    }
  }
  // Async and typed forms.
  list.add(1001).async = true;
  list.add(1001, DataType::float32, ReduceOp::sum, size - 1).typed = true;
  Case& typed_async = list.add(257, DataType::float32, ReduceOp::sum, size / 2);
  typed_async.typed = true;
  typed_async.async = true;
  if (has_in_place(collective)) {
    Case& typed_in_place = list.add(64, DataType::float32, ReduceOp::sum, size - 1);
    typed_in_place.typed = true;
    typed_in_place.call.in_place = true;
    // No typed in-place form of gather/scatter (the root's span would mean
    // something else than the others'); the raw form covers them.
    if (collective == Collective::gather || collective == Collective::scatter) list.cases().pop_back();
  }
  if (has_v_variant(collective)) {
    Case& typed_v = list.add(0, DataType::float32, ReduceOp::sum, size - 1);
    typed_v.typed = true;
    if (collective == Collective::alltoall) {
      typed_v.call.count = 3;
      typed_v.call.send_counts = {1};
      typed_v.call.recv_counts = {1};
    } else {
      typed_v.call.counts = variable_counts(size, 9, 0);
    }
  }
  return list.cases();
}

}  // namespace

MatrixOutcome run_matrix(Context& context) {
  MatrixOutcome outcome;
  std::vector<int> host_of(static_cast<size_t>(context.size()));
  for (int rank = 0; rank < context.size(); ++rank) host_of[static_cast<size_t>(rank)] = context.host_of(rank);
  const auto topology = std::make_shared<const Topology>(host_of);
  std::vector<const Algorithm*> algorithms;
  for (const Algorithm& algorithm : algorithms::all_algorithms()) algorithms.push_back(&algorithm);
  // "auto" too, once per collective, through the same cases.
  static const Collective collectives[] = {Collective::allreduce, Collective::broadcast,      Collective::barrier,
                                           Collective::reduce,    Collective::reduce_scatter, Collective::allgather,
                                           Collective::gather,    Collective::scatter,        Collective::alltoall};
  std::vector<std::pair<const Algorithm*, bool>> runs;  // (algorithm, as auto)
  for (const Algorithm* algorithm : algorithms) runs.emplace_back(algorithm, false);
  for (Collective collective : collectives) {
    auto first = std::find_if(algorithms.begin(), algorithms.end(),
                              [&](const Algorithm* a) { return a->collective == collective; });
    if (first == algorithms.end()) {
      outcome.skipped.push_back(cat(algorithms::to_string(collective), ": no algorithm registered"));
      continue;
    }
    runs.emplace_back(*first, true);
  }

  for (auto [algorithm, as_auto] : runs) {
    size_t unsupported = 0;
    for (Case test : cases_for(*algorithm, context.rank(), context.size())) {
      if (as_auto) {
        test.algorithm = "auto";
      } else {
        const Support support = algorithm_support(*algorithm, test, topology);
        if (support == Support::some) {
          outcome.failure = cat(describe(test), ": supported on some ranks but not on others");
          return outcome;
        }
        if (support == Support::none) {
          ++unsupported;
          continue;
        }
      }
      CHORUS_LOG(debug, context.rank(), "case: ", describe(test));
      std::string failure = run_case(context, test);
      ++outcome.cases_run;
      if (!failure.empty()) {
        outcome.failure = failure;
        return outcome;
      }
    }
    if (unsupported > 0)
      outcome.skipped.push_back(cat(algorithms::to_string(algorithm->collective), "/", algorithm->name, ": ",
                                    unsupported, " cases not supported on ", context.size(), " ranks"));
  }
  return outcome;
}

}  // namespace chorus::collective_test
