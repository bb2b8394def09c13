// Inputs whose collective results are exact in any reduction order (small
// integers, in every type), and the bit-exact check of the results.
#pragma once

#include <cstddef>
#include <string_view>

#include "chorus/types.h"

namespace chorus::bench {

enum class Operation { allreduce, broadcast, barrier };

// Fills this rank's input for the operation.
void fill_input(Operation operation, DataType type, ReduceOp op, int rank, int size, int root, void* data,
                size_t count);
// Number of elements of output that differ (bit for bit) from the exact result.
size_t count_wrong(Operation operation, DataType type, ReduceOp op, int rank, int size, int root, const void* output,
                   size_t count);

}  // namespace chorus::bench
