// Inputs whose collective results are exact in any reduction order (small
// integers, in every type), and the bit-exact check of the results, for
// every collective chorus-bench runs.
//
// `count` follows the collective's own meaning (algorithms/model/call.h): the
// whole buffer for allreduce, broadcast and reduce; one rank's block for
// allgather, reduce_scatter, gather, scatter and alltoall.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "base/types.h"

namespace chorus::bench {

enum class Operation { allreduce, broadcast, reduce, allgather, reduce_scatter, gather, scatter, alltoall, barrier };

std::optional<Operation> parse_operation(std::string_view name);
std::string_view to_string(Operation operation);
bool reduces(Operation operation);
bool has_root(Operation operation);

// Elements of this rank's input and output buffers (0 where unused: a
// non-root's output of reduce/gather, a non-root's input of scatter).
size_t input_elements(Operation operation, int rank, int size, int root, size_t count);
size_t output_elements(Operation operation, int rank, int size, int root, size_t count);

// Fills this rank's input for the operation (broadcast: the data buffer,
// which non-roots fill with a pattern the broadcast must overwrite).
void fill_input(Operation operation, DataType type, ReduceOp op, int rank, int size, int root, void* data,
                size_t count);
// Number of elements of this rank's result that differ (bit for bit) from
// the exact result; `output` is the output buffer (broadcast: the data buffer).
size_t count_wrong(Operation operation, DataType type, ReduceOp op, int rank, int size, int root, const void* output,
                   size_t count);

}  // namespace chorus::bench
