// The argument checks every public collective shares.
#include "api/collective_checks.h"

#include <cstddef>
#include <cstdint>

#include "api/context_state.h"
#include "base/log.h"

namespace chorus::detail {

using algorithms::Call;
using algorithms::Collective;

Call make_call(Context& context, Collective collective, size_t count, DataType type, ReduceOp op, int root,
               bool in_place) {
  return algorithms::make_call(collective, context.rank(), context.size(), count, type, op, root, in_place);
}

void abort_for(Context& context, std::exception_ptr reason) {
  communicator_of(context).mesh().abort(std::move(reason));
}

void check_type(Context& context, const char* collective, DataType type) {
  if (static_cast<unsigned>(type) > static_cast<unsigned>(DataType::float64))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " got an unknown data type (",
                              static_cast<unsigned>(type), ")"));
}

void check_reduction(Context& context, const char* collective, DataType type, ReduceOp op) {
  check_type(context, collective, type);
  if (static_cast<unsigned>(op) > static_cast<unsigned>(ReduceOp::bxor))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " got an unknown reduce op (",
                              static_cast<unsigned>(op), ")"));
  try {
    validate_reduction(type, op);
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, ": ", error.what()));
  }
}

void check_bytes(Context& context, const char* collective, size_t count, DataType type) {
  if (count > SIZE_MAX / element_size(type))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " count ", count, " of ", to_string(type),
                              " overflows size_t bytes"));
}

void check_not_null(Context& context, const char* collective, const char* name, const void* buffer, size_t count) {
  if (count > 0 && buffer == nullptr)
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " got a null ", name, " buffer for ", count,
                              " elements"));
}

void check_root(Context& context, const char* collective, int root) {
  if (root < 0 || root >= context.size())
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " root ", root,
                              " is out of range for a context of size ", context.size(), " (expected 0..",
                              context.size() - 1, ")"));
}

void check_overlap(Context& context, const char* collective, const void* input, size_t input_bytes,
                   const void* output, size_t output_bytes) {
  if (input_bytes == 0 || output_bytes == 0 || input == nullptr || output == nullptr) return;
  auto in = reinterpret_cast<uintptr_t>(input);
  auto out = reinterpret_cast<uintptr_t>(output);
  if (in < out + output_bytes && out < in + input_bytes)
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective,
                              " input and output buffers overlap but are not the in-place layout (see the "
                              "collective's documentation)"));
}

bool block_in_place(Context& context, const char* collective, const Call& call, const void* whole,
                    const void* block) {
  const size_t element = element_size(call.type);
  const std::byte* own_block = static_cast<const std::byte*>(whole) + call.block_offset(context.rank()) * element;
  if (block == own_block) return true;
  check_overlap(context, collective, whole, call.total_count() * element, block,
                call.block_count(context.rank()) * element);
  return false;
}

size_t checked_product(Context& context, const char* collective, size_t count, size_t blocks, DataType type) {
  if (blocks != 0 && count > SIZE_MAX / blocks)
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " count ", count, " times ", blocks,
                              " blocks overflows size_t"));
  check_bytes(context, collective, count * blocks, type);
  return count * blocks;
}

size_t check_counts(Context& context, const char* collective, const char* name, std::span<const size_t> counts,
                    DataType type) {
  if (counts.size() != static_cast<size_t>(context.size()))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " ", name, " has ", counts.size(),
                              " entries but the context has ", context.size(), " ranks (expected one per rank)"));
  size_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > SIZE_MAX - total)
      throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " ", name, " sum overflows size_t at entry ",
                                i));
    total += counts[i];
  }
  check_bytes(context, collective, total, type);
  return total;
}

}  // namespace chorus::detail
