// float16/bfloat16 reduction kernels for x86 CPUs with AVX2 and F16C, picked
// at run time so the library itself still targets baseline x86-64. Internal
// to reduce.cc (not installed).
//
// Why: with baseline SSE2 the branch-free software conversions of half.h
// dominate (about 1 GB/s for float16 sum, below a 10 GbE link). F16C converts
// 8 halves per instruction, and AVX2 doubles the width of the bfloat16 loops.
// Results are bit-identical to the portable kernels: F16C rounds to nearest
// even by the immediate (not MXCSR) and quiets NaNs the way half.h does.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "base/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define CHORUS_X86_16BIT_KERNELS 1
#include <cpuid.h>
#include <immintrin.h>

namespace chorus::x86 {

inline bool cpu_has_avx2_and_f16c() {
  // F16C from CPUID leaf 1 (ECX bit 29) itself: clang 14's
  // __builtin_cpu_supports does not know "f16c" (the fuzz build uses clang).
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2");
  }();
  return supported;
}

// Floats staged per block; a and b together take 2 KiB of L1.
constexpr size_t float_block = 256;

// Processes the largest multiple of 8 elements of `count` and returns how many
// it did; the caller finishes the tail with the portable kernel.
template <class Op>
__attribute__((target("avx2,f16c"))) size_t combine_float16(uint16_t* __restrict accumulator,
                                                              const uint16_t* __restrict operand, size_t count,
                                                              Op op) {
  alignas(32) float a[float_block];
  alignas(32) float b[float_block];
  const size_t vector_count = count - count % 8;
  for (size_t start = 0; start < vector_count; start += float_block) {
    const size_t n = std::min(float_block, vector_count - start);
    for (size_t j = 0; j < n; j += 8) {
      const auto* accumulator_lanes = reinterpret_cast<const __m128i*>(accumulator + start + j);
      const auto* operand_lanes = reinterpret_cast<const __m128i*>(operand + start + j);
      _mm256_store_ps(a + j, _mm256_cvtph_ps(_mm_loadu_si128(accumulator_lanes)));
      _mm256_store_ps(b + j, _mm256_cvtph_ps(_mm_loadu_si128(operand_lanes)));
    }
    for (size_t j = 0; j < n; ++j) a[j] = op(a[j], b[j]);
    for (size_t j = 0; j < n; j += 8) {
      const __m128i rounded = _mm256_cvtps_ph(_mm256_load_ps(a + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(accumulator + start + j), rounded);
    }
  }
  return vector_count;
}

__attribute__((target("avx2,f16c"))) inline size_t divide_float16(uint16_t* data, size_t count, float divisor) {
  const size_t vector_count = count - count % 8;
  const __m256 divisors = _mm256_set1_ps(divisor);
  for (size_t i = 0; i < vector_count; i += 8) {
    auto* lanes = reinterpret_cast<__m128i*>(data + i);
    const __m256 quotient = _mm256_div_ps(_mm256_cvtph_ps(_mm_loadu_si128(lanes)), divisors);
    _mm_storeu_si128(lanes, _mm256_cvtps_ph(quotient, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return vector_count;
}

// bfloat16 needs no special instructions: the portable branch-free loop,
// compiled for AVX2, vectorises 8 lanes wide.
template <class Op>
__attribute__((target("avx2"))) void combine_bfloat16(uint16_t* __restrict accumulator,
                                                       const uint16_t* __restrict operand, size_t count, Op op) {
  for (size_t i = 0; i < count; ++i) {
    accumulator[i] =
        float_to_bfloat16_bits(op(bfloat16_bits_to_float(accumulator[i]), bfloat16_bits_to_float(operand[i])));
  }
}

}  // namespace chorus::x86

#endif
