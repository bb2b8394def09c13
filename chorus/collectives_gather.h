// The collectives that move blocks without reducing them: allgather, gather,
// scatter, alltoall and their v variants (included by chorus/collectives.h).
//
// `count` is one rank's block; the large side (allgather/gather output,
// scatter input, both alltoall buffers) holds size() blocks in rank order.
// The v variants take one count per rank (zeros allowed), blocks contiguous
// in rank order. Buffers of the async forms must stay valid until the Work
// finishes; count vectors are copied.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>

#include "chorus/collective_options.h"
#include "chorus/context.h"
#include "base/types.h"
#include "chorus/work.h"

namespace chorus {

// Every rank's input (count elements) lands in block r of every output. In
// place: input is this rank's block inside output (input == output +
// rank() * count elements).
void allgather(Context& context, const void* input, void* output, size_t count, DataType type,
               const CollectiveOptions& options = {});
Work allgather_async(Context& context, const void* input, void* output, size_t count, DataType type,
                     const CollectiveOptions& options = {});
// Rank r contributes counts[r] elements. In place as for allgather.
void allgatherv(Context& context, const void* input, void* output, std::span<const size_t> counts, DataType type,
                const CollectiveOptions& options = {});
Work allgatherv_async(Context& context, const void* input, void* output, std::span<const size_t> counts,
                      DataType type, const CollectiveOptions& options = {});

// Root's output receives every rank's input in rank order; output is used on
// root only (others may pass null). In place on root: input is root's block
// inside output.
void gather(Context& context, const void* input, void* output, size_t count, DataType type, int root,
            const CollectiveOptions& options = {});
Work gather_async(Context& context, const void* input, void* output, size_t count, DataType type, int root,
                  const CollectiveOptions& options = {});
void gatherv(Context& context, const void* input, void* output, std::span<const size_t> counts, DataType type,
             int root, const CollectiveOptions& options = {});
Work gatherv_async(Context& context, const void* input, void* output, std::span<const size_t> counts,
                   DataType type, int root, const CollectiveOptions& options = {});

// Block r of root's input goes to rank r's output; input is used on root
// only (others may pass null). In place on root: output is root's block
// inside input.
void scatter(Context& context, const void* input, void* output, size_t count, DataType type, int root,
             const CollectiveOptions& options = {});
Work scatter_async(Context& context, const void* input, void* output, size_t count, DataType type, int root,
                   const CollectiveOptions& options = {});
void scatterv(Context& context, const void* input, void* output, std::span<const size_t> counts, DataType type,
              int root, const CollectiveOptions& options = {});
Work scatterv_async(Context& context, const void* input, void* output, std::span<const size_t> counts,
                    DataType type, int root, const CollectiveOptions& options = {});

// Block p of this rank's input goes to block rank() of peer p's output.
// Out of place only.
void alltoall(Context& context, const void* input, void* output, size_t count, DataType type,
              const CollectiveOptions& options = {});
Work alltoall_async(Context& context, const void* input, void* output, size_t count, DataType type,
                    const CollectiveOptions& options = {});
// This rank sends send_counts[p] elements to peer p and receives
// recv_counts[p] from it; recv_counts[p] here must equal peer p's send_counts[rank()].
void alltoallv(Context& context, const void* input, std::span<const size_t> send_counts, void* output,
               std::span<const size_t> recv_counts, DataType type, const CollectiveOptions& options = {});
Work alltoallv_async(Context& context, const void* input, std::span<const size_t> send_counts, void* output,
                     std::span<const size_t> recv_counts, DataType type, const CollectiveOptions& options = {});

// ---- typed overloads (element type from the output span; spans are checked
// against the counts and rejected with InvalidArgument).

namespace detail {
template <class T>
T* root_only(Context& context, int root, std::span<T> buffer) {
  return context.rank() == root && !buffer.empty() ? buffer.data() : nullptr;
}
}  // namespace detail

template <class T>
void allgather(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
               const CollectiveOptions& options = {}) {
  detail::expect_blocks(context, "allgather", "an output", input.size(), output.size());
  allgather(context, input.data(), output.data(), input.size(), data_type_of<T>(), options);
}
// In place: data holds size() blocks and this rank's block is already filled.
template <class T>
void allgather(Context& context, std::span<T> data, const CollectiveOptions& options = {}) {
  const size_t block = detail::block_of(context, "allgather", data.size());
  allgather(context, data.data() + block * static_cast<size_t>(context.rank()), data.data(), block,
            data_type_of<T>(), options);
}
template <class T>
Work allgather_async(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                     const CollectiveOptions& options = {}) {
  detail::expect_blocks(context, "allgather", "an output", input.size(), output.size());
  return allgather_async(context, input.data(), output.data(), input.size(), data_type_of<T>(), options);
}
template <class T>
void allgatherv(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                std::span<const size_t> counts, const CollectiveOptions& options = {}) {
  detail::expect_elements(context, "allgatherv", "an input", detail::count_of_rank(context, "allgatherv", counts),
                          input.size());
  detail::expect_elements(context, "allgatherv", "an output", detail::sum_of_counts(context, "allgatherv", counts),
                          output.size());
  allgatherv(context, input.data(), output.data(), counts, data_type_of<T>(), options);
}
// In place: this rank's block of data (at the sum of the counts before it) is already filled.
template <class T>
void allgatherv(Context& context, std::span<T> data, std::span<const size_t> counts,
                const CollectiveOptions& options = {}) {
  detail::expect_elements(context, "allgatherv", "a buffer", detail::sum_of_counts(context, "allgatherv", counts),
                          data.size());
  allgatherv(context, data.data() + detail::block_offset_of_rank(context, counts), data.data(), counts,
             data_type_of<T>(), options);
}
template <class T>
Work allgatherv_async(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                      std::span<const size_t> counts, const CollectiveOptions& options = {}) {
  detail::expect_elements(context, "allgatherv", "an input", detail::count_of_rank(context, "allgatherv", counts),
                          input.size());
  detail::expect_elements(context, "allgatherv", "an output", detail::sum_of_counts(context, "allgatherv", counts),
                          output.size());
  return allgatherv_async(context, input.data(), output.data(), counts, data_type_of<T>(), options);
}

// output matters on root only (other ranks may pass an empty span).
template <class T>
void gather(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output, int root,
            const CollectiveOptions& options = {}) {
  if (context.rank() == root)
    detail::expect_blocks(context, "gather", "an output on root", input.size(), output.size());
  gather(context, input.data(), detail::root_only(context, root, output), input.size(), data_type_of<T>(), root,
         options);
}
template <class T>
Work gather_async(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output, int root,
                  const CollectiveOptions& options = {}) {
  if (context.rank() == root)
    detail::expect_blocks(context, "gather", "an output on root", input.size(), output.size());
  return gather_async(context, input.data(), detail::root_only(context, root, output), input.size(),
                      data_type_of<T>(), root, options);
}
template <class T>
void gatherv(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
             std::span<const size_t> counts, int root, const CollectiveOptions& options = {}) {
  detail::expect_elements(context, "gatherv", "an input", detail::count_of_rank(context, "gatherv", counts),
                          input.size());
  if (context.rank() == root)
    detail::expect_elements(context, "gatherv", "an output on root", detail::sum_of_counts(context, "gatherv", counts),
                            output.size());
  gatherv(context, input.data(), detail::root_only(context, root, output), counts, data_type_of<T>(), root, options);
}

// input matters on root only (other ranks may pass an empty span).
template <class T>
void scatter(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output, int root,
             const CollectiveOptions& options = {}) {
  if (context.rank() == root)
    detail::expect_blocks(context, "scatter", "an input on root", output.size(), input.size());
  scatter(context, detail::root_only(context, root, input), output.data(), output.size(), data_type_of<T>(), root,
          options);
}
template <class T>
Work scatter_async(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output, int root,
                   const CollectiveOptions& options = {}) {
  if (context.rank() == root)
    detail::expect_blocks(context, "scatter", "an input on root", output.size(), input.size());
  return scatter_async(context, detail::root_only(context, root, input), output.data(), output.size(),
                       data_type_of<T>(), root, options);
}
template <class T>
void scatterv(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
              std::span<const size_t> counts, int root, const CollectiveOptions& options = {}) {
  detail::expect_elements(context, "scatterv", "an output", detail::count_of_rank(context, "scatterv", counts),
                          output.size());
  if (context.rank() == root)
    detail::expect_elements(context, "scatterv", "an input on root", detail::sum_of_counts(context, "scatterv", counts),
                            input.size());
  scatterv(context, detail::root_only(context, root, input), output.data(), counts, data_type_of<T>(), root, options);
}

template <class T>
void alltoall(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
              const CollectiveOptions& options = {}) {
  if (input.size() != output.size()) throw_size_mismatch(context, "alltoall", input.size(), output.size());
  alltoall(context, input.data(), output.data(), detail::block_of(context, "alltoall", output.size()),
           data_type_of<T>(), options);
}
template <class T>
Work alltoall_async(Context& context, std::span<const std::type_identity_t<T>> input, std::span<T> output,
                    const CollectiveOptions& options = {}) {
  if (input.size() != output.size()) throw_size_mismatch(context, "alltoall", input.size(), output.size());
  return alltoall_async(context, input.data(), output.data(), detail::block_of(context, "alltoall", output.size()),
                        data_type_of<T>(), options);
}
template <class T>
void alltoallv(Context& context, std::span<const std::type_identity_t<T>> input, std::span<const size_t> send_counts,
               std::span<T> output, std::span<const size_t> recv_counts, const CollectiveOptions& options = {}) {
  detail::expect_elements(context, "alltoallv", "an input", detail::sum_of_counts(context, "alltoallv", send_counts),
                          input.size());
  detail::expect_elements(context, "alltoallv", "an output", detail::sum_of_counts(context, "alltoallv", recv_counts),
                          output.size());
  alltoallv(context, input.data(), send_counts, output.data(), recv_counts, data_type_of<T>(), options);
}
template <class T>
Work alltoallv_async(Context& context, std::span<const std::type_identity_t<T>> input,
                     std::span<const size_t> send_counts, std::span<T> output, std::span<const size_t> recv_counts,
                     const CollectiveOptions& options = {}) {
  detail::expect_elements(context, "alltoallv", "an input", detail::sum_of_counts(context, "alltoallv", send_counts),
                          input.size());
  detail::expect_elements(context, "alltoallv", "an output", detail::sum_of_counts(context, "alltoallv", recv_counts),
                          output.size());
  return alltoallv_async(context, input.data(), send_counts, output.data(), recv_counts, data_type_of<T>(), options);
}

}  // namespace chorus
