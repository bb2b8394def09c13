// What every rank of a real-socket collective test puts in and what it must
// get back, computed independently of the library: each rank can generate
// every other rank's input, so it knows its exact expected output. Values
// are small integers, exact in every type and in any reduction order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/call.h"
#include "base/types.h"

namespace chorus::collective_test {

using algorithms::Call;
using algorithms::Collective;

// alltoallv in these tests: rank `from` sends this many elements to rank
// `to` (zeros included); a test call marks alltoallv by non-empty
// send_counts and carries `scale` in count.
size_t alltoallv_count(int from, int to, size_t scale);

// Element `index` of rank `rank`'s input for this call (reductions pick
// values whose op result is exact; data movement tells ranks and blocks apart).
int64_t input_value(const Call& call, int rank, size_t index);

// The bytes of rank `rank`'s input buffer (whole buffer; empty where the
// collective reads no input on that rank).
std::vector<std::byte> input_bytes_of(const Call& call, int rank);
// The bytes this rank's output must hold afterwards (empty where the
// collective writes no output on this rank). In place, the same layout.
std::vector<std::byte> expected_output(const Call& call);

// Elements of `type` at these bytes (for messages: index of the first difference).
size_t first_difference(DataType type, const std::vector<std::byte>& expected, const std::byte* actual);

// Sizes of the buffers, in elements (input/output of this rank).
size_t input_elements(const Call& call);
size_t output_elements(const Call& call);

}  // namespace chorus::collective_test
