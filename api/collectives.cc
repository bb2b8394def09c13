// The reductions, broadcast and barrier: check arguments locally (so a bad
// call fails on the rank that made it, before any byte moves), describe the
// call, and issue it to the algorithm layer.
#include "chorus/collectives.h"

#include <cstdint>
#include <vector>

#include "api/collective_checks.h"
#include "api/context_state.h"
#include "api/issue.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus {
namespace {

using algorithms::Call;
using algorithms::Collective;
using namespace detail;

Work allreduce_impl(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                    const CollectiveOptions& options, bool async) {
  check_reduction(context, "allreduce", type, op);
  check_bytes(context, "allreduce", count, type);
  check_not_null(context, "allreduce", "input", input, count);
  check_not_null(context, "allreduce", "output", output, count);
  if (input != output)
    check_overlap(context, "allreduce", input, count * element_size(type), output, count * element_size(type));
  return issue(context, CallShape{Collective::allreduce, count, type, op, 0, input == output}, input, output, options,
               async);
}

Work broadcast_impl(Context& context, void* data, size_t count, DataType type, int root,
                    const CollectiveOptions& options, bool async) {
  check_type(context, "broadcast", type);
  check_bytes(context, "broadcast", count, type);
  check_not_null(context, "broadcast", "data", data, count);
  check_root(context, "broadcast", root);
  return issue(context, CallShape{Collective::broadcast, count, type, ReduceOp::sum, root, true}, data, data, options,
               async);
}

Work barrier_impl(Context& context, const CollectiveOptions& options, bool async) {
  return issue(context, CallShape{Collective::barrier, 0, DataType::uint8, ReduceOp::sum, 0, true}, nullptr, nullptr,
               options, async);
}

// Only root's output is written: other ranks' output is not even looked at.
Work reduce_impl(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                 int root, const CollectiveOptions& options, bool async) {
  check_reduction(context, "reduce", type, op);
  check_bytes(context, "reduce", count, type);
  check_root(context, "reduce", root);
  check_not_null(context, "reduce", "input", input, count);
  const bool is_root = context.rank() == root;
  if (is_root) {
    check_not_null(context, "reduce", "output (on root)", output, count);
    if (input != output)
      check_overlap(context, "reduce", input, count * element_size(type), output, count * element_size(type));
  }
  return issue(context, CallShape{Collective::reduce, count, type, op, root, is_root && input == output}, input,
               is_root ? output : nullptr, options, async);
}

// `call` carries count or counts; in place means output is this rank's
// block inside input.
Work reduce_scatter_impl(Context& context, Call call, const void* input, void* output,
                         const CollectiveOptions& options, bool async) {
  const char* name = call.variable() ? "reduce_scatter_v" : "reduce_scatter";
  const size_t total = call.total_count();
  const size_t own = call.block_count(context.rank());
  check_not_null(context, name, "input", input, total);
  check_not_null(context, name, "output", output, own);
  call.in_place = block_in_place(context, name, call, input, output);
  return issue(context, std::move(call), input, output, options, async);
}

Work reduce_scatter_fixed(Context& context, const void* input, void* output, size_t count, DataType type,
                          ReduceOp op, const CollectiveOptions& options, bool async) {
  check_reduction(context, "reduce_scatter", type, op);
  const size_t total = checked_product(context, "reduce_scatter", count, static_cast<size_t>(context.size()), type);
  check_not_null(context, "reduce_scatter", "input", input, total);
  check_not_null(context, "reduce_scatter", "output", output, count);
  // Fixed counts need no Call (as allgather's, collectives_gather.cc).
  const bool in_place = fixed_block_in_place(context, "reduce_scatter", count, type, input, output);
  return issue(context, CallShape{Collective::reduce_scatter, count, type, op, 0, in_place}, input, output, options,
               async);
}

Work reduce_scatter_variable(Context& context, const void* input, void* output, std::span<const size_t> counts,
                             DataType type, ReduceOp op, const CollectiveOptions& options, bool async) {
  check_reduction(context, "reduce_scatter_v", type, op);
  const size_t total = check_counts(context, "reduce_scatter_v", "counts", counts, type);
  // Every rank holds the same counts, so the total is a count they agree on
  // (and what the mismatch check compares).
  Call call = make_call(context, Collective::reduce_scatter, total, type, op, 0, false);
  call.counts.assign(counts.begin(), counts.end());
  return reduce_scatter_impl(context, std::move(call), input, output, options, async);
}

}  // namespace

void allreduce(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
               const CollectiveOptions& options) {
  aborting_on_invalid_argument(context,
                               [&] { return allreduce_impl(context, input, output, count, type, op, options, false); });
}

Work allreduce_async(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                     const CollectiveOptions& options) {
  return aborting_on_invalid_argument(
      context, [&] { return allreduce_impl(context, input, output, count, type, op, options, true); });
}

void broadcast(Context& context, void* data, size_t count, DataType type, int root, const CollectiveOptions& options) {
  aborting_on_invalid_argument(context,
                               [&] { return broadcast_impl(context, data, count, type, root, options, false); });
}

Work broadcast_async(Context& context, void* data, size_t count, DataType type, int root,
                     const CollectiveOptions& options) {
  return aborting_on_invalid_argument(context,
                                      [&] { return broadcast_impl(context, data, count, type, root, options, true); });
}

void barrier(Context& context, const CollectiveOptions& options) { barrier_impl(context, options, false); }

Work barrier_async(Context& context, const CollectiveOptions& options) { return barrier_impl(context, options, true); }

void reduce(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op, int root,
            const CollectiveOptions& options) {
  aborting_on_invalid_argument(
      context, [&] { return reduce_impl(context, input, output, count, type, op, root, options, false); });
}

Work reduce_async(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                  int root, const CollectiveOptions& options) {
  return aborting_on_invalid_argument(
      context, [&] { return reduce_impl(context, input, output, count, type, op, root, options, true); });
}

void reduce_scatter(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                    const CollectiveOptions& options) {
  aborting_on_invalid_argument(
      context, [&] { return reduce_scatter_fixed(context, input, output, count, type, op, options, false); });
}

Work reduce_scatter_async(Context& context, const void* input, void* output, size_t count, DataType type,
                          ReduceOp op, const CollectiveOptions& options) {
  return aborting_on_invalid_argument(
      context, [&] { return reduce_scatter_fixed(context, input, output, count, type, op, options, true); });
}

void reduce_scatter_v(Context& context, const void* input, void* output, std::span<const size_t> counts,
                      DataType type, ReduceOp op, const CollectiveOptions& options) {
  aborting_on_invalid_argument(
      context, [&] { return reduce_scatter_variable(context, input, output, counts, type, op, options, false); });
}

Work reduce_scatter_v_async(Context& context, const void* input, void* output, std::span<const size_t> counts,
                            DataType type, ReduceOp op, const CollectiveOptions& options) {
  return aborting_on_invalid_argument(
      context, [&] { return reduce_scatter_variable(context, input, output, counts, type, op, options, true); });
}

void throw_size_mismatch(Context& context, const char* collective, size_t input_count, size_t output_count) {
  aborting_on_invalid_argument(context, [&]() -> Work {
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " input has ", input_count,
                              " elements but output has ", output_count));
  });
  __builtin_unreachable();
}

void throw_bad_span(Context& context, const char* collective, const std::string& what) {
  aborting_on_invalid_argument(context, [&]() -> Work {
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " expected ", what));
  });
  __builtin_unreachable();
}

namespace detail {

size_t block_of(Context& context, const char* collective, size_t total) {
  const auto ranks = static_cast<size_t>(context.size());
  if (total % ranks != 0)
    throw_bad_span(context, collective,
                   cat("a buffer of ", ranks, " equal blocks (one per rank), but got ", total,
                       " elements, not a multiple of ", ranks));
  return total / ranks;
}

void expect_blocks(Context& context, const char* collective, const char* name, size_t block, size_t actual) {
  const auto ranks = static_cast<size_t>(context.size());
  if (actual % ranks != 0 || actual / ranks != block)
    throw_bad_span(context, collective,
                   cat(name, " of ", ranks, " blocks of ", block, " elements, but got ", actual, " elements"));
}

void expect_elements(Context& context, const char* collective, const char* name, size_t expected, size_t actual) {
  if (expected != actual)
    throw_bad_span(context, collective, cat(name, " of ", expected, " elements, but got ", actual));
}

namespace {
void expect_one_count_per_rank(Context& context, const char* collective, std::span<const size_t> counts) {
  if (counts.size() != static_cast<size_t>(context.size()))
    throw_bad_span(context, collective,
                   cat("one count per rank (", context.size(), "), but got ", counts.size(), " counts"));
}
}  // namespace

size_t sum_of_counts(Context& context, const char* collective, std::span<const size_t> counts) {
  expect_one_count_per_rank(context, collective, counts);
  size_t total = 0;
  for (size_t count : counts) {
    if (count > SIZE_MAX - total) throw_bad_span(context, collective, "counts whose sum fits in size_t");
    total += count;
  }
  return total;
}

size_t count_of_rank(Context& context, const char* collective, std::span<const size_t> counts) {
  expect_one_count_per_rank(context, collective, counts);
  return counts[static_cast<size_t>(context.rank())];
}

size_t block_offset_of_rank(Context& context, std::span<const size_t> counts) {
  size_t offset = 0;
  for (int r = 0; r < context.rank() && static_cast<size_t>(r) < counts.size(); ++r)
    offset += counts[static_cast<size_t>(r)];
  return offset;
}

}  // namespace detail
}  // namespace chorus
