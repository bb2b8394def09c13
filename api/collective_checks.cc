// The argument checks every public collective shares.
#include "api/collective_checks.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "algorithms/model/call_rules.h"
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

// The rules themselves are the algorithm layer's (call_rules.h), which
// checks a Call it is handed with the same words.
namespace {
void throw_if(const std::string& problem) {
  if (!problem.empty()) throw InvalidArgument(problem);
}
}  // namespace

// Each asks the rule first: its words are built only when it fails.
void check_type(Context& context, const char* collective, DataType type) {
  if (!algorithms::type_known(type)) throw_if(algorithms::type_problem(context.rank(), collective, type));
}

void check_reduction(Context& context, const char* collective, DataType type, ReduceOp op) {
  if (!algorithms::reduction_holds(type, op))
    throw_if(algorithms::reduction_problem(context.rank(), collective, type, op));
}

void check_bytes(Context& context, const char* collective, size_t count, DataType type) {
  if (!algorithms::bytes_fit(count, type)) throw_if(algorithms::bytes_problem(context.rank(), collective, count, type));
}

void check_not_null(Context& context, const char* collective, const char* name, const void* buffer, size_t count) {
  if (!algorithms::buffer_given(buffer, count))
    throw_if(algorithms::null_buffer_problem(context.rank(), collective, name, buffer, count));
}

void check_root(Context& context, const char* collective, int root) {
  if (!algorithms::root_in_range(root, context.size()))
    throw_if(algorithms::root_problem(context.rank(), context.size(), collective, root));
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

bool fixed_block_in_place(Context& context, const char* collective, size_t count, DataType type, const void* whole,
                          const void* block) {
  const size_t block_bytes = count * element_size(type);
  const std::byte* own_block = static_cast<const std::byte*>(whole) + static_cast<size_t>(context.rank()) * block_bytes;
  if (block == own_block) return true;
  check_overlap(context, collective, whole, block_bytes * static_cast<size_t>(context.size()), block, block_bytes);
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
  throw_if(algorithms::counts_problem(context.rank(), context.size(), collective, name, counts, type));
  size_t total = 0;
  for (size_t count : counts) total += count;
  return total;
}

}  // namespace chorus::detail
