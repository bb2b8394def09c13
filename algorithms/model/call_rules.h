// The rules every call keeps, written once: the public API checks them on
// its arguments before a call is built, and the algorithm layer checks a
// Call it is handed directly (run.h: checked_call). Each returns what is
// wrong, in words that name the rank and the collective, or "" when the
// rule holds; the caller throws InvalidArgument with it.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "base/types.h"

namespace chorus::algorithms {

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
