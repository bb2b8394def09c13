// The collectives. One style: free functions taking a Context, raw (pointer,
// count, type) forms, typed std::span overloads, and _async variants that
// return a Work. Every rank of the Context must call the same collective with
// the same count, type, op and root, in the same order.
//
// This header has the reductions, broadcast and barrier; it includes
// collectives_gather.h (allgather, gather, scatter, alltoall and their v
// variants), collectives_grouped.h (many buffers as one collective) and
// point_to_point.h (send/recv), so it is the one to include.
//
// Counts: for allreduce, broadcast and reduce `count` is the whole buffer;
// for reduce_scatter it is one rank's block (the input holds size() blocks in
// rank order). The v variants take one count per rank (zeros allowed); block
// r starts at the sum of the counts before it.
//
// Buffers of the async forms must stay valid until the Work finishes; count
// vectors are copied, so they need not.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include "chorus/collective_options.h"
#include "chorus/collectives_gather.h"
#include "chorus/collectives_grouped.h"
#include "chorus/context.h"
#include "chorus/point_to_point.h"
#include "base/types.h"
#include "chorus/work.h"

namespace chorus {

// input may equal output (in place).
void allreduce(Context& context, const void* input, void* output, size_t count, DataType type,
               ReduceOp op, const CollectiveOptions& options = {});
Work allreduce_async(Context& context, const void* input, void* output, size_t count,
                     DataType type, ReduceOp op, const CollectiveOptions& options = {});

// On root, data is sent; everywhere else it is overwritten.
void broadcast(Context& context, void* data, size_t count, DataType type, int root,
               const CollectiveOptions& options = {});
Work broadcast_async(Context& context, void* data, size_t count, DataType type, int root,
                     const CollectiveOptions& options = {});

void barrier(Context& context, const CollectiveOptions& options = {});
Work barrier_async(Context& context, const CollectiveOptions& options = {});

// Root's output receives op over every rank's input (count elements each).
// Output is used on root only: other ranks may pass null. On root, input may
// equal output (in place).
void reduce(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
            int root, const CollectiveOptions& options = {});
Work reduce_async(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                  int root, const CollectiveOptions& options = {});

// input holds size() blocks of `count` elements; output (count elements)
// receives op over every rank's block number rank(). In place: output is
// this rank's block inside input (output == input + rank() * count elements);
// the other blocks of input are then left unspecified.
void reduce_scatter(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                    const CollectiveOptions& options = {});
Work reduce_scatter_async(Context& context, const void* input, void* output, size_t count, DataType type,
                          ReduceOp op, const CollectiveOptions& options = {});
// Block r of input has counts[r] elements; output has counts[rank()].
void reduce_scatter_v(Context& context, const void* input, void* output, std::span<const size_t> counts,
                      DataType type, ReduceOp op, const CollectiveOptions& options = {});
Work reduce_scatter_v_async(Context& context, const void* input, void* output, std::span<const size_t> counts,
                            DataType type, ReduceOp op, const CollectiveOptions& options = {});

// ---- typed overloads. The element type is taken from the output span, so
// inputs may be given as any contiguous range of the same type.

template <class T>
void allreduce(Context& context, std::span<T> data, ReduceOp op, const CollectiveOptions& options = {}) {
  allreduce(context, data.data(), data.data(), data.size(), data_type_of<std::remove_cv_t<T>>(), op, options);
}
template <class T>
void allreduce(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output, ReduceOp op,
               const CollectiveOptions& options = {}) {
  if (input.size() != output.size()) throw_size_mismatch(context, "allreduce", input.size(), output.size());
  allreduce(context, input.data(), output.data(), input.size(), data_type_of<T>(), op, options);
}
template <class T>
Work allreduce_async(Context& context, std::span<T> data, ReduceOp op, const CollectiveOptions& options = {}) {
  return allreduce_async(context, data.data(), data.data(), data.size(), data_type_of<std::remove_cv_t<T>>(), op,
                         options);
}
template <class T>
Work allreduce_async(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                     ReduceOp op, const CollectiveOptions& options = {}) {
  if (input.size() != output.size()) throw_size_mismatch(context, "allreduce", input.size(), output.size());
  return allreduce_async(context, input.data(), output.data(), input.size(), data_type_of<T>(), op, options);
}

template <class T>
void broadcast(Context& context, std::span<T> data, int root, const CollectiveOptions& options = {}) {
  broadcast(context, data.data(), data.size(), data_type_of<T>(), root, options);
}
template <class T>
Work broadcast_async(Context& context, std::span<T> data, int root, const CollectiveOptions& options = {}) {
  return broadcast_async(context, data.data(), data.size(), data_type_of<T>(), root, options);
}

namespace detail {
// A typed reduce's output: root needs input.size() elements, other ranks
// pass an empty span (or one of any size: it is not touched).
template <class T>
T* reduce_output(Context& context, size_t input_size, std::span<T> output, int root) {
  if (context.rank() != root) return output.empty() ? nullptr : output.data();
  if (output.size() != input_size) throw_size_mismatch(context, "reduce", input_size, output.size());
  return output.data();
}
}  // namespace detail

template <class T>
void reduce(Context& context, std::span<T> data, ReduceOp op, int root, const CollectiveOptions& options = {}) {
  T* output = context.rank() == root ? data.data() : nullptr;
  reduce(context, data.data(), output, data.size(), data_type_of<T>(), op, root, options);
}
template <class T>
void reduce(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output, ReduceOp op,
            int root, const CollectiveOptions& options = {}) {
  reduce(context, input.data(), detail::reduce_output(context, input.size(), output, root), input.size(),
         data_type_of<T>(), op, root, options);
}
template <class T>
Work reduce_async(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                  ReduceOp op, int root, const CollectiveOptions& options = {}) {
  return reduce_async(context, input.data(), detail::reduce_output(context, input.size(), output, root),
                      input.size(), data_type_of<T>(), op, root, options);
}

template <class T>
void reduce_scatter(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                    ReduceOp op, const CollectiveOptions& options = {}) {
  detail::expect_blocks(context, "reduce_scatter", "an input", output.size(), input.size());
  reduce_scatter(context, input.data(), output.data(), output.size(), data_type_of<T>(), op, options);
}
// In place: data holds size() blocks; this rank's block receives the result.
template <class T>
void reduce_scatter(Context& context, std::span<T> data, ReduceOp op, const CollectiveOptions& options = {}) {
  const size_t block = detail::block_of(context, "reduce_scatter", data.size());
  reduce_scatter(context, data.data(), data.data() + block * static_cast<size_t>(context.rank()), block,
                 data_type_of<T>(), op, options);
}
template <class T>
Work reduce_scatter_async(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                          ReduceOp op, const CollectiveOptions& options = {}) {
  detail::expect_blocks(context, "reduce_scatter", "an input", output.size(), input.size());
  return reduce_scatter_async(context, input.data(), output.data(), output.size(), data_type_of<T>(), op, options);
}

namespace detail {
// A typed reduce_scatter_v's spans: the input holds every rank's block, the
// output this rank's.
inline void expect_reduce_scatter_v_sizes(Context& context, std::span<const size_t> counts, size_t input_size,
                                          size_t output_size) {
  expect_elements(context, "reduce_scatter_v", "an input", sum_of_counts(context, "reduce_scatter_v", counts),
                  input_size);
  expect_elements(context, "reduce_scatter_v", "an output", count_of_rank(context, "reduce_scatter_v", counts),
                  output_size);
}
}  // namespace detail

template <class T>
void reduce_scatter_v(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                      std::span<const size_t> counts, ReduceOp op, const CollectiveOptions& options = {}) {
  detail::expect_reduce_scatter_v_sizes(context, counts, input.size(), output.size());
  reduce_scatter_v(context, input.data(), output.data(), counts, data_type_of<T>(), op, options);
}
template <class T>
Work reduce_scatter_v_async(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                            std::span<const size_t> counts, ReduceOp op, const CollectiveOptions& options = {}) {
  detail::expect_reduce_scatter_v_sizes(context, counts, input.size(), output.size());
  return reduce_scatter_v_async(context, input.data(), output.data(), counts, data_type_of<T>(), op, options);
}

}  // namespace chorus
