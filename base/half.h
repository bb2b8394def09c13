// Conversions between float and the 16-bit float formats (IEEE binary16 and
// bfloat16), rounding to nearest even, with NaN, infinities and subnormals
// handled exactly. Internal to the library (not installed).
//
// The functions are branch-free on purpose: every case is computed and the
// right one selected, so loops converting arrays auto-vectorise. Their results
// do not change when a host application enables flush-to-zero or
// denormals-are-zero; they do assume the default round-to-nearest FPU mode.
#pragma once

#include <bit>
#include <cstdint>

#include "base/host_device.h"
#include "base/types.h"

namespace chorus {

// A select written as masks: with plain ?: g++ moves the float arithmetic of
// the subnormal case into a branch (it may trap, so it is not if-converted)
// and the loop no longer vectorises.
CHORUS_HOST_DEVICE inline uint32_t select_bits(bool condition, uint32_t if_true, uint32_t if_false) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (if_true & mask) | (if_false & ~mask);
}

CHORUS_HOST_DEVICE inline float half_bits_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t magnitude = half & 0x7fffu;
  const uint32_t exponent = magnitude & 0x7c00u;

  // Normal numbers: move exponent and mantissa into place and rebias 15 -> 127.
  const uint32_t rebiased = (magnitude << 13) + ((127u - 15u) << 23);
  // Inf/NaN: exponent becomes all ones, the mantissa (NaN payload) is kept.
  const uint32_t inf_or_nan = (magnitude << 13) | 0x7f800000u;
  // Subnormals (and zero): value = mantissa * 2^-24. Built as the normal float
  // 2^-14 * (1 + mantissa/1024) minus 2^-14, an exact subtraction of normals.
  const float subnormal_value =
      std::bit_cast<float>((magnitude << 13) + (113u << 23)) - std::bit_cast<float>(113u << 23);
  const uint32_t subnormal = std::bit_cast<uint32_t>(subnormal_value);

  uint32_t bits = select_bits(exponent == 0x7c00u, inf_or_nan, rebiased);
  bits = select_bits(exponent == 0, subnormal, bits);
  return std::bit_cast<float>(bits | sign);
}

CHORUS_HOST_DEVICE inline uint16_t float_to_half_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;

  // Normal results: add half an ulp of binary16 (minus one when the kept
  // mantissa is even, which makes exact ties round to even). A carry out of
  // the mantissa correctly bumps the exponent, up to infinity at 65520.
  const uint32_t keep_odd = (magnitude >> 13) & 1u;
  const uint32_t normal = (magnitude - ((127u - 15u) << 23) + 0xfffu + keep_odd) >> 13;
  // Subnormal results (|value| < 2^-14): adding 0.5 makes the FPU round the
  // value to a multiple of 2^-24 (the ulp of 0.5) in nearest-even mode; the
  // low bits of the sum are then the binary16 mantissa. Float subnormals
  // underflow to 0 either way, so flush-to-zero does not change the answer.
  const float shifted = std::bit_cast<float>(select_bits(magnitude < 0x38800000u, magnitude, 0u)) + 0.5f;
  const uint32_t subnormal = std::bit_cast<uint32_t>(shifted) - 0x3f000000u;
  // NaN stays NaN: keep the top of the payload and force the quiet bit so a
  // payload living only in the dropped low bits cannot turn into infinity.
  const uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x3ffu);

  uint32_t result = select_bits(magnitude < 0x38800000u, subnormal, normal);
  result = select_bits(magnitude >= 0x47800000u, 0x7c00u, result);  // >= 2^16 and infinity
  result = select_bits(magnitude > 0x7f800000u, nan, result);
  return static_cast<uint16_t>(result | sign);
}

CHORUS_HOST_DEVICE inline float bfloat16_bits_to_float(uint16_t bfloat) {
  return std::bit_cast<float>(static_cast<uint32_t>(bfloat) << 16);
}

CHORUS_HOST_DEVICE inline uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  // bfloat16 is the top half of a float; round the dropped half to nearest even.
  // The carry may overflow into the exponent, which yields infinity correctly.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

inline float to_float(float16_t value) { return half_bits_to_float(value.bits); }
inline float to_float(bfloat16_t value) { return bfloat16_bits_to_float(value.bits); }
inline float16_t to_float16(float value) { return float16_t{float_to_half_bits(value)}; }
inline bfloat16_t to_bfloat16(float value) { return bfloat16_t{float_to_bfloat16_bits(value)}; }

}  // namespace chorus
