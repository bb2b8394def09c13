// What every rank of a checked collective (the real-socket tests,
// chorus-soak, chorus-bench --check) puts in and what it must get back,
// computed independently of the library: each rank can generate every other
// rank's input, so it knows its exact expected output. Values are small
// integers, exact in every type and in any reduction order.
//
// `salt` shifts every pattern along the buffer (element i takes the value
// element i + salt had), so calls of one shape can carry different data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/model/call.h"
#include "base/types.h"

namespace chorus::oracle {

using algorithms::Call;
using algorithms::Collective;

// alltoallv in these tests: rank `from` sends this many elements to rank
// `to` (zeros included); a test call marks alltoallv by non-empty
// send_counts and carries `scale` in count.
size_t alltoallv_count(int from, int to, size_t scale);

// The value patterns. Reductions: element `index` of rank `rank`'s input
// among `size` ranks, chosen so that `op` over all of them is exact (sum:
// at most 4 + size; prod: 1 or 2, at most three 2s; min/max below 29; avg:
// rank 0 adds `size`, so the mean is an integer; bitwise: 7 bits) and
// `reduced_value` is that result. Moved data (everything that does not
// reduce): below 101, different between ranks and along the buffer.
int64_t reduction_input(ReduceOp op, int rank, int size, size_t index);
int64_t reduced_value(ReduceOp op, int size, size_t index);
int64_t moved_input(int rank, size_t index);

// Element `index` of rank `rank`'s input for this call (reductions pick
// values whose op result is exact; data movement tells ranks and blocks apart).
int64_t input_value(const Call& call, int rank, size_t index, size_t salt = 0);

// The bytes of rank `rank`'s input buffer (whole buffer; empty where the
// collective reads no input on that rank).
std::vector<std::byte> input_bytes_of(const Call& call, int rank, size_t salt = 0);
// The bytes this rank's output must hold afterwards (empty where the
// collective writes no output on this rank). In place, the same layout.
std::vector<std::byte> expected_output(const Call& call, size_t salt = 0);

// Elements of `type` at these bytes (for messages: index of the first difference).
size_t first_difference(DataType type, const std::vector<std::byte>& expected, const std::byte* actual);
// One element of `type` for messages: its value and its bytes ("3 (0x4200)").
std::string element_text(DataType type, const std::byte* element);

// Sizes of the buffers, in elements (input/output of this rank).
size_t input_elements(const Call& call);
size_t output_elements(const Call& call);

}  // namespace chorus::oracle
