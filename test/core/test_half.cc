// float16 / bfloat16 <-> float conversions: exhaustive over all 16-bit
// patterns, every rounding boundary between neighbouring values, and the
// special cases (ties to even, overflow, subnormals, NaN).
#include <catch2/catch.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/half.h"

using namespace chorus;

namespace {

uint32_t bits_of(float value) { return std::bit_cast<uint32_t>(value); }
float float_from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

bool is_half_nan(uint16_t half) { return (half & 0x7c00) == 0x7c00 && (half & 0x03ff) != 0; }
bool is_bfloat16_nan(uint16_t bfloat) { return (bfloat & 0x7f80) == 0x7f80 && (bfloat & 0x007f) != 0; }

// The value of a binary16 pattern computed from its definition, in double.
double half_value_by_definition(uint16_t half) {
  const int exponent = (half >> 10) & 0x1f;
  const int mantissa = half & 0x3ff;
  const double sign = (half & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return sign * std::numeric_limits<double>::infinity();
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// For each pair of neighbouring finite values (lower, upper) of a 16-bit
// format: the midpoint is exact in float, must round to the even pattern, and
// one float ulp either side must round to the nearer pattern.
template <class ToFloat, class FromFloat>
void check_rounding_boundaries(uint16_t largest_finite, ToFloat to_float_fn, FromFloat from_float_fn) {
  for (uint32_t sign : {0u, 0x8000u}) {
    for (uint32_t pattern = 0; pattern < largest_finite; ++pattern) {
      const auto lower = static_cast<uint16_t>(pattern | sign);
      const auto upper = static_cast<uint16_t>((pattern + 1) | sign);
      const float low_value = to_float_fn(lower);
      const float high_value = to_float_fn(upper);
      const float midpoint = low_value + (high_value - low_value) / 2;
      REQUIRE(static_cast<double>(midpoint) ==
              (static_cast<double>(low_value) + static_cast<double>(high_value)) / 2);
      const uint16_t even = (pattern % 2 == 0) ? lower : upper;
      INFO("lower pattern 0x" << std::hex << lower);
      REQUIRE(from_float_fn(midpoint) == even);
      REQUIRE(from_float_fn(std::nextafter(midpoint, low_value)) == lower);
      REQUIRE(from_float_fn(std::nextafter(midpoint, high_value)) == upper);
      REQUIRE(from_float_fn(low_value) == lower);
    }
  }
}

}  // namespace

TEST_CASE("float16 to float is exact for all 65536 patterns", "[half]") {
  for (uint32_t pattern = 0; pattern <= 0xffff; ++pattern) {
    const auto half = static_cast<uint16_t>(pattern);
    const float value = half_bits_to_float(half);
    INFO("pattern 0x" << std::hex << pattern);
    if (is_half_nan(half)) {
      REQUIRE(std::isnan(value));
      REQUIRE(std::signbit(value) == ((half & 0x8000) != 0));
      // Quiet NaNs round trip unchanged; signalling ones come back quieted.
      REQUIRE(float_to_half_bits(value) == (half | 0x0200));
    } else {
      REQUIRE(static_cast<double>(value) == half_value_by_definition(half));
      REQUIRE(std::signbit(value) == ((half & 0x8000) != 0));
      REQUIRE(float_to_half_bits(value) == half);
    }
#ifdef __FLT16_MAX__
    // The compiler's own _Float16 is an independent reference on x86.
    const float reference = static_cast<float>(std::bit_cast<_Float16>(half));
    REQUIRE((std::isnan(reference) ? std::isnan(value) : bits_of(reference) == bits_of(value)));
#endif
  }
}

TEST_CASE("bfloat16 to float is exact for all 65536 patterns", "[half]") {
  for (uint32_t pattern = 0; pattern <= 0xffff; ++pattern) {
    const auto bfloat = static_cast<uint16_t>(pattern);
    const float value = bfloat16_bits_to_float(bfloat);
    INFO("pattern 0x" << std::hex << pattern);
    REQUIRE(bits_of(value) == pattern << 16);
    if (is_bfloat16_nan(bfloat)) {
      REQUIRE(float_to_bfloat16_bits(value) == (bfloat | 0x0040));
    } else {
      REQUIRE(float_to_bfloat16_bits(value) == bfloat);
    }
  }
}

TEST_CASE("float to float16 rounds to nearest even at every boundary", "[half]") {
  check_rounding_boundaries(0x7bff, half_bits_to_float, float_to_half_bits);
}

TEST_CASE("float to bfloat16 rounds to nearest even at every boundary", "[half]") {
  check_rounding_boundaries(0x7f7f, bfloat16_bits_to_float, float_to_bfloat16_bits);
}

TEST_CASE("float16 known cases", "[half]") {
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-2.0f) == 0xc000);
  CHECK(float_to_half_bits(0.1f) == 0x2e66);
  CHECK(float_to_half_bits(1.0f / 3.0f) == 0x3555);
  CHECK(float_to_half_bits(0.0f) == 0x0000);
  CHECK(float_to_half_bits(-0.0f) == 0x8000);
  // 2049 lies exactly between 2048 and 2050: ties to even keeps 2048; 2051 goes to 2052.
  CHECK(float_to_half_bits(2049.0f) == float_to_half_bits(2048.0f));
  CHECK(float_to_half_bits(2051.0f) == float_to_half_bits(2052.0f));

  // Overflow: 65504 is the largest half; 65520 is the tie with 2^16 and goes to infinity.
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);
  CHECK(float_to_half_bits(65519.996f) == 0x7bff);
  CHECK(float_to_half_bits(65520.0f) == 0x7c00);
  CHECK(float_to_half_bits(65536.0f) == 0x7c00);
  CHECK(float_to_half_bits(1e10f) == 0x7c00);
  CHECK(float_to_half_bits(-FLT_MAX) == 0xfc00);
  CHECK(float_to_half_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(float_to_half_bits(-std::numeric_limits<float>::infinity()) == 0xfc00);

  // Subnormals: 2^-24 is the smallest; 2^-25 ties between 0 and it and goes to 0 (even).
  CHECK(float_to_half_bits(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_half_bits(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(float_to_half_bits(std::ldexp(3.0f, -26)) == 0x0001);
  CHECK(float_to_half_bits(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 ulp: tie, to even 2
  CHECK(float_to_half_bits(-std::ldexp(1023.0f, -24)) == 0x83ff);
  CHECK(float_to_half_bits(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(float_to_half_bits(std::ldexp(2047.0f, -25)) == 0x0400);  // rounds up out of the subnormals
  CHECK(float_to_half_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(float_to_half_bits(-std::numeric_limits<float>::denorm_min()) == 0x8000);
  CHECK(half_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(half_bits_to_float(0x03ff) == std::ldexp(1023.0f, -24));

  // NaN stays NaN, also when its payload sits only in bits binary16 drops.
  CHECK(is_half_nan(float_to_half_bits(std::numeric_limits<float>::quiet_NaN())));
  CHECK(float_to_half_bits(float_from_bits(0x7f800001)) == 0x7e00);
  CHECK(float_to_half_bits(float_from_bits(0xff800001)) == 0xfe00);
  CHECK(float_to_half_bits(float_from_bits(0x7fc02000)) == 0x7e01);
  CHECK(std::isnan(half_bits_to_float(0x7c01)));
  CHECK(std::isinf(half_bits_to_float(0x7c00)));
}

TEST_CASE("bfloat16 known cases", "[half]") {
  CHECK(float_to_bfloat16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16_bits(float_from_bits(0x3f808000)) == 0x3f80);  // tie, even stays
  CHECK(float_to_bfloat16_bits(float_from_bits(0x3f818000)) == 0x3f82);  // tie, odd rounds up
  CHECK(float_to_bfloat16_bits(float_from_bits(0x3f808001)) == 0x3f81);
  CHECK(float_to_bfloat16_bits(FLT_MAX) == 0x7f80);  // rounds past the largest bfloat16
  CHECK(float_to_bfloat16_bits(float_from_bits(0x7f7f7fff)) == 0x7f7f);
  CHECK(float_to_bfloat16_bits(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(float_to_bfloat16_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(float_to_bfloat16_bits(float_from_bits(0x00018000)) == 0x0002);  // subnormal tie to even
  CHECK(float_to_bfloat16_bits(float_from_bits(0x7f800001)) == 0x7fc0);
  CHECK(float_to_bfloat16_bits(float_from_bits(0xffffffff)) == 0xffff);
  CHECK(is_bfloat16_nan(float_to_bfloat16_bits(std::numeric_limits<float>::quiet_NaN())));
}

#ifdef __FLT16_MAX__
TEST_CASE("float to float16 agrees with the compiler's _Float16 on a sweep of floats", "[half]") {
  // About a million patterns spread over all signs, exponents and mantissas.
  for (uint64_t pattern = 0; pattern <= 0xffffffffu; pattern += 4093) {
    const float value = float_from_bits(static_cast<uint32_t>(pattern));
    const uint16_t ours = float_to_half_bits(value);
    const auto reference = std::bit_cast<uint16_t>(static_cast<_Float16>(value));
    INFO("float pattern 0x" << std::hex << pattern);
    if (std::isnan(value)) {
      REQUIRE(is_half_nan(ours));
    } else {
      REQUIRE(ours == reference);
    }
  }
}
#endif
