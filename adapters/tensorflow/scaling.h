// Horovod's prescale and postscale factors, computed as Horovod computes
// them on the CPU, so that chorus.tensorflow gives Horovod's numbers: the
// factor (a float attribute, so rounded to float32 first) multiplies
// integers in float64 and the product is truncated toward zero; float16
// and bfloat16 in float32; float32 in float32; float64 in float64.
// Average is a sum with its postscale divided by the ranks (in float64),
// as Horovod does it, so an integer average truncates toward zero.
#pragma once

#include <cstddef>

#include "base/types.h"

namespace chorus::tensorflow_ops {

// output[i] = input[i] * factor, per the rules above (input == output is fine).
void scale(DataType type, const void* input, void* output, size_t count, double factor);

}  // namespace chorus::tensorflow_ops
