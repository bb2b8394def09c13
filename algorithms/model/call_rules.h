// The rules every call keeps, written once: the public API checks them on
// its arguments before a call is built, and the algorithm layer checks a
// Call it is handed directly (run.h: checked_call). Each rule is a test
// (inline: every call asks it) and, for when it fails, what is wrong in
// words that name the rank and the collective; the caller throws
// InvalidArgument with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/types.h"

namespace chorus::algorithms {

inline bool type_known(DataType type) {
  return static_cast<unsigned>(type) <= static_cast<unsigned>(DataType::float64);
}
inline bool reduction_holds(DataType type, ReduceOp op) {
  return type_known(type) && static_cast<unsigned>(op) <= static_cast<unsigned>(ReduceOp::bxor) &&
         is_valid_reduction(type, op);
}
inline bool bytes_fit(size_t count, DataType type) { return count <= SIZE_MAX / element_size(type); }
inline bool root_in_range(int root, int size) { return root >= 0 && root < size; }
inline bool buffer_given(const void* buffer, size_t count) { return count == 0 || buffer != nullptr; }

// A data type chorus knows.
std::string type_problem(int rank, std::string_view collective, DataType type);
// A known type and op that reduce together (no bitwise op on floats).
std::string reduction_problem(int rank, std::string_view collective, DataType type, ReduceOp op);
// count elements of `type` fit in size_t bytes.
std::string bytes_problem(int rank, std::string_view collective, size_t count, DataType type);
// A buffer of `count` elements is not null.
std::string null_buffer_problem(int rank, std::string_view collective, std::string_view name, const void* buffer,
                                size_t count);
// A root is a rank of the `size`-rank context.
std::string root_problem(int rank, int size, std::string_view collective, int root);
// One count per rank, and their sum fits in size_t bytes.
std::string counts_problem(int rank, int size, std::string_view collective, std::string_view name,
                           std::span<const size_t> counts, DataType type);

}  // namespace chorus::algorithms
