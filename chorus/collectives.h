// The collectives. One style: free functions taking a Context, raw (pointer,
// count, type) forms, typed std::span overloads, and _async variants that
// return a Work. Every rank of the Context must call the same collective with
// the same count, type, op and root, in the same order.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include "chorus/context.h"
#include "chorus/types.h"
#include "chorus/work.h"

namespace chorus {

struct CollectiveOptions {
  // "auto" or an algorithm name ("ring", "binomial", ...); CHORUS_ALGO
  // (e.g. "allreduce:ring,broadcast:binomial") overrides "auto".
  std::string algorithm = "auto";
  // Defaults to the Context's timeout.
  std::optional<std::chrono::milliseconds> timeout;
};

// input may equal output (in place). Buffers of the async forms must stay
// valid until the Work finishes.
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

// Throws InvalidArgument for typed calls whose input and output sizes differ.
[[noreturn]] void throw_size_mismatch(Context& context, const char* collective, size_t input_count,
                                      size_t output_count);

// Typed overloads.
template <class T>
void allreduce(Context& context, std::span<T> data, ReduceOp op, const CollectiveOptions& options = {}) {
  allreduce(context, data.data(), data.data(), data.size(), data_type_of<std::remove_cv_t<T>>(), op, options);
}
template <class T>
void allreduce(Context& context, std::span<const T> input, std::span<T> output, ReduceOp op,
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
void broadcast(Context& context, std::span<T> data, int root, const CollectiveOptions& options = {}) {
  broadcast(context, data.data(), data.size(), data_type_of<T>(), root, options);
}
template <class T>
Work broadcast_async(Context& context, std::span<T> data, int root, const CollectiveOptions& options = {}) {
  return broadcast_async(context, data.data(), data.size(), data_type_of<T>(), root, options);
}

}  // namespace chorus
