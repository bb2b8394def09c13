// allgather, gather, scatter, alltoall and their v variants: local checks,
// the in-place layouts, then the algorithm layer.
//
// In place, the algorithm layer gets the pointers as the caller laid them
// out (this rank's block inside the large buffer) and the in-place flag.
#include "chorus/collectives_gather.h"

#include <vector>

#include "api/collective_checks.h"
#include "api/issue.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus {
namespace {

using algorithms::Call;
using algorithms::Collective;
using namespace detail;

// A call of fixed counts: its type known and its size() blocks of `count`
// elements in size_t bytes; returns their elements.
size_t fixed_total(Context& context, const char* name, size_t count, DataType type) {
  check_type(context, name, type);
  return checked_product(context, name, count, static_cast<size_t>(context.size()), type);
}

// A v call: every rank passes the same counts, so their total is a count all
// ranks agree on (and what the mismatch check compares).
Call variable_call(Context& context, Collective collective, const char* name, std::span<const size_t> counts,
                   DataType type, int root) {
  check_type(context, name, type);
  const size_t total = check_counts(context, name, "counts", counts, type);
  Call call = make_call(context, collective, total, type, ReduceOp::sum, root, false);
  call.counts.assign(counts.begin(), counts.end());
  return call;
}

const char* name_of(const Call& call, const char* fixed, const char* variable) {
  return call.variable() ? variable : fixed;
}

Work allgather_impl(Context& context, Call call, const void* input, void* output, const CollectiveOptions& options,
                    bool async) {
  const char* name = name_of(call, "allgather", "allgatherv");
  const size_t own = call.block_count(context.rank());
  const size_t total = call.total_count();
  check_not_null(context, name, "input", input, own);
  check_not_null(context, name, "output", output, total);
  call.in_place = block_in_place(context, name, call, output, input);
  return issue(context, std::move(call), input, output, options, async);
}

// Fixed counts need no Call: issue() builds one only for a shape the
// Context has not just run (a Call's vectors and shared topology were a
// fifth of a small allgather's instructions).
Work allgather_fixed(Context& context, const void* input, void* output, size_t count, DataType type,
                     const CollectiveOptions& options, bool async) {
  const size_t total = fixed_total(context, "allgather", count, type);
  check_not_null(context, "allgather", "input", input, count);
  check_not_null(context, "allgather", "output", output, total);
  const bool in_place = fixed_block_in_place(context, "allgather", count, type, output, input);
  return issue(context, CallShape{Collective::allgather, count, type, ReduceOp::sum, 0, in_place}, input, output,
               options, async);
}

// gather and scatter mirror each other: every rank has its own block (gather's
// input, scatter's output), and root alone a buffer of every block (gather's
// output, scatter's input) that the other ranks' calls never look at. Checks
// the block everywhere and root's whole buffer on root, where the block may
// lie inside it (in place).
void check_rooted_buffers(Context& context, const char* name, Call& call, const void* block, const char* block_name,
                          const void* whole, const char* whole_name) {
  check_root(context, name, call.root);
  check_not_null(context, name, block_name, block, call.block_count(context.rank()));
  if (context.rank() != call.root) return;
  check_not_null(context, name, whole_name, whole, call.total_count());
  call.in_place = block_in_place(context, name, call, whole, block);
}

Work gather_impl(Context& context, Call call, const void* input, void* output, const CollectiveOptions& options,
                 bool async) {
  check_rooted_buffers(context, name_of(call, "gather", "gatherv"), call, input, "input", output, "output (on root)");
  if (context.rank() != call.root) output = nullptr;
  return issue(context, std::move(call), input, output, options, async);
}

Work scatter_impl(Context& context, Call call, const void* input, void* output, const CollectiveOptions& options,
                  bool async) {
  check_rooted_buffers(context, name_of(call, "scatter", "scatterv"), call, output, "output", input, "input (on root)");
  if (context.rank() != call.root) input = nullptr;
  return issue(context, std::move(call), input, output, options, async);
}

Work alltoall_impl(Context& context, Call call, const void* input, void* output, size_t send_total,
                   size_t recv_total, const CollectiveOptions& options, bool async) {
  const char* name = call.variable() ? "alltoallv" : "alltoall";
  check_not_null(context, name, "input", input, send_total);
  check_not_null(context, name, "output", output, recv_total);
  check_overlap(context, name, input, send_total * element_size(call.type), output,
                recv_total * element_size(call.type));
  return issue(context, std::move(call), input, output, options, async);
}

Work alltoall_fixed(Context& context, const void* input, void* output, size_t count, DataType type,
                    const CollectiveOptions& options, bool async) {
  const size_t total = fixed_total(context, "alltoall", count, type);
  check_not_null(context, "alltoall", "input", input, total);
  check_not_null(context, "alltoall", "output", output, total);
  const size_t bytes = total * element_size(type);
  check_overlap(context, "alltoall", input, bytes, output, bytes);
  return issue(context, CallShape{Collective::alltoall, count, type, ReduceOp::sum, 0, false}, input, output, options,
               async);
}

Work alltoall_variable(Context& context, const void* input, std::span<const size_t> send_counts, void* output,
                       std::span<const size_t> recv_counts, DataType type, const CollectiveOptions& options,
                       bool async) {
  check_type(context, "alltoallv", type);
  const size_t send_total = check_counts(context, "alltoallv", "send_counts", send_counts, type);
  const size_t recv_total = check_counts(context, "alltoallv", "recv_counts", recv_counts, type);
  // Ranks send different totals, so no count is common to all of them: each
  // message's own length is checked by its receiver instead.
  Call call = make_call(context, Collective::alltoall, 0, type, ReduceOp::sum, 0, false);
  call.send_counts.assign(send_counts.begin(), send_counts.end());
  call.recv_counts.assign(recv_counts.begin(), recv_counts.end());
  return alltoall_impl(context, std::move(call), input, output, send_total, recv_total, options, async);
}

template <class Body>
void blocking(Context& context, Body&& body) {
  aborting_on_invalid_argument(context, std::forward<Body>(body));
}

}  // namespace

void allgather(Context& context, const void* input, void* output, size_t count, DataType type,
               const CollectiveOptions& options) {
  blocking(context, [&] {
    return allgather_fixed(context, input, output, count, type, options, false);
  });
}

Work allgather_async(Context& context, const void* input, void* output, size_t count, DataType type,
                     const CollectiveOptions& options) {
  return aborting_on_invalid_argument(context, [&] {
    return allgather_fixed(context, input, output, count, type, options, true);
  });
}

void allgatherv(Context& context, const void* input, void* output, std::span<const size_t> counts, DataType type,
                const CollectiveOptions& options) {
  blocking(context, [&] {
    return allgather_impl(context, variable_call(context, Collective::allgather, "allgatherv", counts, type, 0),
                          input, output, options, false);
  });
}

Work allgatherv_async(Context& context, const void* input, void* output, std::span<const size_t> counts,
                      DataType type, const CollectiveOptions& options) {
  return aborting_on_invalid_argument(context, [&] {
    return allgather_impl(context, variable_call(context, Collective::allgather, "allgatherv", counts, type, 0),
                          input, output, options, true);
  });
}

// gather and scatter of fixed counts, without a Call (as allgather_fixed):
// the same checks as check_rooted_buffers.
Work rooted_fixed(Context& context, Collective collective, const char* name, const void* input, void* output,
                  size_t count, DataType type, int root, const CollectiveOptions& options, bool async) {
  const size_t total = fixed_total(context, name, count, type);
  check_root(context, name, root);
  const bool gathers = collective == Collective::gather;
  const void* block = gathers ? input : output;
  const void* whole = gathers ? static_cast<const void*>(output) : input;
  check_not_null(context, name, gathers ? "input" : "output", block, count);
  bool in_place = false;
  if (context.rank() == root) {
    check_not_null(context, name, gathers ? "output (on root)" : "input (on root)", whole, total);
    in_place = fixed_block_in_place(context, name, count, type, whole, block);
  } else if (gathers) {
    output = nullptr;
  } else {
    input = nullptr;
  }
  return issue(context, CallShape{collective, count, type, ReduceOp::sum, root, in_place}, input, output, options,
               async);
}

void gather(Context& context, const void* input, void* output, size_t count, DataType type, int root,
            const CollectiveOptions& options) {
  blocking(context, [&] {
    return rooted_fixed(context, Collective::gather, "gather", input, output, count, type, root, options, false);
  });
}

Work gather_async(Context& context, const void* input, void* output, size_t count, DataType type, int root,
                  const CollectiveOptions& options) {
  return aborting_on_invalid_argument(context, [&] {
    return rooted_fixed(context, Collective::gather, "gather", input, output, count, type, root, options, true);
  });
}

void gatherv(Context& context, const void* input, void* output, std::span<const size_t> counts, DataType type,
             int root, const CollectiveOptions& options) {
  blocking(context, [&] {
    return gather_impl(context, variable_call(context, Collective::gather, "gatherv", counts, type, root), input,
                       output, options, false);
  });
}

Work gatherv_async(Context& context, const void* input, void* output, std::span<const size_t> counts, DataType type,
                   int root, const CollectiveOptions& options) {
  return aborting_on_invalid_argument(context, [&] {
    return gather_impl(context, variable_call(context, Collective::gather, "gatherv", counts, type, root), input,
                       output, options, true);
  });
}

void scatter(Context& context, const void* input, void* output, size_t count, DataType type, int root,
             const CollectiveOptions& options) {
  blocking(context, [&] {
    return rooted_fixed(context, Collective::scatter, "scatter", input, output, count, type, root, options, false);
  });
}

Work scatter_async(Context& context, const void* input, void* output, size_t count, DataType type, int root,
                   const CollectiveOptions& options) {
  return aborting_on_invalid_argument(context, [&] {
    return rooted_fixed(context, Collective::scatter, "scatter", input, output, count, type, root, options, true);
  });
}

void scatterv(Context& context, const void* input, void* output, std::span<const size_t> counts, DataType type,
              int root, const CollectiveOptions& options) {
  blocking(context, [&] {
    return scatter_impl(context, variable_call(context, Collective::scatter, "scatterv", counts, type, root), input,
                        output, options, false);
  });
}

Work scatterv_async(Context& context, const void* input, void* output, std::span<const size_t> counts, DataType type,
                    int root, const CollectiveOptions& options) {
  return aborting_on_invalid_argument(context, [&] {
    return scatter_impl(context, variable_call(context, Collective::scatter, "scatterv", counts, type, root), input,
                        output, options, true);
  });
}

void alltoall(Context& context, const void* input, void* output, size_t count, DataType type,
              const CollectiveOptions& options) {
  blocking(context, [&] { return alltoall_fixed(context, input, output, count, type, options, false); });
}

Work alltoall_async(Context& context, const void* input, void* output, size_t count, DataType type,
                    const CollectiveOptions& options) {
  return aborting_on_invalid_argument(
      context, [&] { return alltoall_fixed(context, input, output, count, type, options, true); });
}

void alltoallv(Context& context, const void* input, std::span<const size_t> send_counts, void* output,
               std::span<const size_t> recv_counts, DataType type, const CollectiveOptions& options) {
  blocking(context, [&] {
    return alltoall_variable(context, input, send_counts, output, recv_counts, type, options, false);
  });
}

Work alltoallv_async(Context& context, const void* input, std::span<const size_t> send_counts, void* output,
                     std::span<const size_t> recv_counts, DataType type, const CollectiveOptions& options) {
  return aborting_on_invalid_argument(context, [&] {
    return alltoall_variable(context, input, send_counts, output, recv_counts, type, options, true);
  });
}

}  // namespace chorus
