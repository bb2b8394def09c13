// Every ReduceOp, in declaration order (the order to_string's names follow).
#pragma once

#include "base/types.h"

namespace chorus::testing {

inline constexpr ReduceOp all_reduce_ops[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,  ReduceOp::max,
                                              ReduceOp::avg, ReduceOp::band, ReduceOp::bor,  ReduceOp::bxor};

}  // namespace chorus::testing
