// What one rank asks of one collective call: the input to every Plan builder,
// to the cost model and to the mismatch check between ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chorus/types.h"

namespace chorus::algorithms {

enum class Collective : uint8_t { allreduce, broadcast, barrier };

std::string_view to_string(Collective collective);

struct Call {
  Collective collective = Collective::allreduce;
  int rank = 0;
  int size = 1;
  size_t count = 0;  // elements
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool in_place = true;

  size_t bytes() const { return count * element_size(type); }
};

// 64 bits every rank computes identically for the same call; carried in every
// frame so a rank that called something else gets MismatchError.
uint64_t call_signature(const Call& call);
// Human description of the call a signature came from, for MismatchError
// messages ("allreduce of 1000 float32 sum"); the count is only known modulo 2^32.
std::string describe_signature(uint64_t signature);

}  // namespace chorus::algorithms
