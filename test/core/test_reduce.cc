// reduce_into and finish_average for every (type, op) pair, bit-exact against
// a scalar reference, over odd counts and unaligned buffers.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "base/reduce.h"
#include "test/core/all_reduce_ops.h"

using namespace chorus;

namespace {

uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool is_bitwise(ReduceOp op) { return op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor; }

// --- scalar references, written independently of the kernels -------------

// Integers: exact result in 128 bits, then the C++20 modular conversion.
template <class T>
T reference_integer(ReduceOp op, T a, T b) {
  using Wide = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return static_cast<T>(static_cast<Wide>(a) + static_cast<Wide>(b));
    case ReduceOp::prod: return static_cast<T>(static_cast<Wide>(a) * static_cast<Wide>(b));
    case ReduceOp::min: return a <= b ? a : b;
    case ReduceOp::max: return a >= b ? a : b;
    case ReduceOp::band: return static_cast<T>(a & b);
    case ReduceOp::bor: return static_cast<T>(a | b);
    case ReduceOp::bxor: return static_cast<T>(a ^ b);
  }
  return 0;
}

// Floats: min/max propagate NaN from either side.
template <class F>
F reference_float(ReduceOp op, F a, F b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return std::isnan(a) || std::isnan(b) ? std::numeric_limits<F>::quiet_NaN() : (b < a ? b : a);
    case ReduceOp::max: return std::isnan(a) || std::isnan(b) ? std::numeric_limits<F>::quiet_NaN() : (a < b ? b : a);
    default: return 0;
  }
}

template <class T>
struct Traits {  // native integer and float types
  using Storage = T;
  static T reference(ReduceOp op, T a, T b) {
    if constexpr (std::is_integral_v<T>) return reference_integer(op, a, b);
    else return reference_float(op, a, b);
  }
  static bool is_nan(T value) {
    if constexpr (std::is_integral_v<T>) return false;
    else return std::isnan(value);
  }
  static T random(uint64_t& state) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(next_random(state));  // full range: negatives, wraparound
    } else {
      // Small integers keep float sums and products exact.
      return static_cast<T>(static_cast<int>(next_random(state) % 129) - 64);
    }
  }
};

template <uint16_t (*from_float)(float), float (*to_float)(uint16_t)>
struct SixteenBitTraits {
  using Storage = uint16_t;
  static uint16_t reference(ReduceOp op, uint16_t a, uint16_t b) {
    return from_float(reference_float(op, to_float(a), to_float(b)));
  }
  static bool is_nan(uint16_t value) { return std::isnan(to_float(value)); }
  static uint16_t random(uint64_t& state) {
    const uint64_t draw = next_random(state);
    // Mostly small integers and simple fractions; some arbitrary patterns so
    // rounding, subnormals, infinities and NaN go through the kernels too.
    if (draw % 8 == 0) return static_cast<uint16_t>(draw >> 16);
    return from_float(static_cast<float>(static_cast<int>((draw >> 8) % 257) - 128) / 8.0f);
  }
};
using Float16Traits = SixteenBitTraits<float_to_half_bits, half_bits_to_float>;
using BFloat16Traits = SixteenBitTraits<float_to_bfloat16_bits, bfloat16_bits_to_float>;

template <class Traits>
std::vector<typename Traits::Storage> random_values(size_t count, uint64_t seed) {
  using S = typename Traits::Storage;
  std::vector<S> values(count);
  for (S& value : values) value = Traits::random(seed);
  return values;
}

// Runs reduce_into on copies placed at the given byte offsets from an aligned
// base and compares every element with the reference.
template <class Traits>
void check_reduction(DataType type, ReduceOp op, size_t count, size_t accumulator_offset, size_t operand_offset,
                     uint64_t seed) {
  using S = typename Traits::Storage;
  std::vector<S> accumulator = random_values<Traits>(count, seed);
  std::vector<S> operand = random_values<Traits>(count, seed * 31 + 7);
  if constexpr (std::is_integral_v<S> && !std::is_same_v<Traits, Float16Traits> &&
                !std::is_same_v<Traits, BFloat16Traits>) {
    // Edge values at the front: extremes against each other, -1, 0, 1, mixed signs.
    const S edges[] = {std::numeric_limits<S>::min(), std::numeric_limits<S>::max(), static_cast<S>(-1), 0, 1};
    for (size_t i = 0; i < count && i < 25; ++i) {
      accumulator[i] = edges[i % 5];
      operand[i] = edges[i / 5];
    }
  }

  std::vector<unsigned char> accumulator_storage(count * sizeof(S) + 64);
  std::vector<unsigned char> operand_storage(count * sizeof(S) + 64);
  unsigned char* accumulator_bytes = accumulator_storage.data() + accumulator_offset;
  unsigned char* operand_bytes = operand_storage.data() + operand_offset;
  if (count > 0) {
    std::memcpy(accumulator_bytes, accumulator.data(), count * sizeof(S));
    std::memcpy(operand_bytes, operand.data(), count * sizeof(S));
  }
  reduce_into(type, op, accumulator_bytes, operand_bytes, count);

  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    S result;
    std::memcpy(&result, accumulator_bytes + i * sizeof(S), sizeof(S));
    const S expected = Traits::reference(op, accumulator[i], operand[i]);
    const bool same = Traits::is_nan(expected) ? Traits::is_nan(result)
                                               : std::memcmp(&result, &expected, sizeof(S)) == 0;
    if (!same && mismatches++ < 3) {
      FAIL_CHECK(to_string(type) << " " << to_string(op) << " count " << count << " offsets " << accumulator_offset
                                 << "/" << operand_offset << ": element " << i << " is "
                                 << +static_cast<std::conditional_t<sizeof(S) == 1, int, S>>(result)
                                 << ", expected "
                                 << +static_cast<std::conditional_t<sizeof(S) == 1, int, S>>(expected));
    }
  }
  CHECK(mismatches == 0);
  // Bytes around the buffer are untouched.
  CHECK(accumulator_storage[0] == 0);
  CHECK(accumulator_storage[accumulator_offset + count * sizeof(S)] == 0);
}

template <class Traits>
void check_all_ops(DataType type) {
  const size_t counts[] = {0, 1, 7, 8, 9, 31, 255, 256, 257, 1000};
  for (ReduceOp op : testing::all_reduce_ops) {
    if (is_bitwise(op) && is_floating_point(type)) continue;
    for (size_t count : counts) {
      for (size_t accumulator_offset : {size_t{8}, size_t{9}}) {
        for (size_t operand_offset : {size_t{8}, size_t{11}}) {
          check_reduction<Traits>(type, op, count, accumulator_offset, operand_offset, count * 131 + 17);
        }
      }
    }
    check_reduction<Traits>(type, op, 1000003, 8, 8, 99);
    check_reduction<Traits>(type, op, 1000003, 9, 10, 98);
  }
}

template <class T>
std::vector<T> averaged(DataType type, std::vector<T> values, size_t contributors) {
  finish_average(type, values.data(), values.size(), contributors);
  return values;
}

}  // namespace

TEST_CASE("reduce int8", "[reduce]") { check_all_ops<Traits<int8_t>>(DataType::int8); }
TEST_CASE("reduce uint8", "[reduce]") { check_all_ops<Traits<uint8_t>>(DataType::uint8); }
TEST_CASE("reduce int32", "[reduce]") { check_all_ops<Traits<int32_t>>(DataType::int32); }
TEST_CASE("reduce uint32", "[reduce]") { check_all_ops<Traits<uint32_t>>(DataType::uint32); }
TEST_CASE("reduce int64", "[reduce]") { check_all_ops<Traits<int64_t>>(DataType::int64); }
TEST_CASE("reduce uint64", "[reduce]") { check_all_ops<Traits<uint64_t>>(DataType::uint64); }
TEST_CASE("reduce float16", "[reduce]") { check_all_ops<Float16Traits>(DataType::float16); }
TEST_CASE("reduce bfloat16", "[reduce]") { check_all_ops<BFloat16Traits>(DataType::bfloat16); }
TEST_CASE("reduce float32", "[reduce]") { check_all_ops<Traits<float>>(DataType::float32); }
TEST_CASE("reduce float64", "[reduce]") { check_all_ops<Traits<double>>(DataType::float64); }

TEST_CASE("hand-checked reductions", "[reduce]") {
  std::vector<int8_t> small = {127, -128, -5, 100};
  const std::vector<int8_t> small_operand = {1, -1, 7, 100};
  reduce_into(DataType::int8, ReduceOp::sum, small.data(), small_operand.data(), small.size());
  CHECK(small == std::vector<int8_t>{-128, 127, 2, -56});

  std::vector<uint32_t> unsigned_values = {0xffffffffu, 3, 0x80000000u};
  const std::vector<uint32_t> unsigned_operand = {2, 0xffffffffu, 2};
  reduce_into(DataType::uint32, ReduceOp::prod, unsigned_values.data(), unsigned_operand.data(), 3);
  CHECK(unsigned_values == std::vector<uint32_t>{0xfffffffeu, 0xfffffffdu, 0});

  std::vector<int64_t> mixed = {-3, 5, std::numeric_limits<int64_t>::min()};
  const std::vector<int64_t> mixed_operand = {2, -9, std::numeric_limits<int64_t>::max()};
  std::vector<int64_t> minimum = mixed;
  reduce_into(DataType::int64, ReduceOp::min, minimum.data(), mixed_operand.data(), 3);
  CHECK(minimum == std::vector<int64_t>{-3, -9, std::numeric_limits<int64_t>::min()});
  reduce_into(DataType::int64, ReduceOp::max, mixed.data(), mixed_operand.data(), 3);
  CHECK(mixed == std::vector<int64_t>{2, 5, std::numeric_limits<int64_t>::max()});

  std::vector<uint16_t> halves = {float_to_half_bits(1.5f), float_to_half_bits(2048.0f), float_to_half_bits(65504.0f)};
  const std::vector<uint16_t> half_operand = {float_to_half_bits(2.25f), float_to_half_bits(1.0f),
                                              float_to_half_bits(32.0f)};
  reduce_into(DataType::float16, ReduceOp::sum, halves.data(), half_operand.data(), 3);
  // 2048 + 1 is a tie between 2048 and 2050 and stays on the even 2048; 65504 + 32 overflows.
  CHECK(halves == std::vector<uint16_t>{float_to_half_bits(3.75f), float_to_half_bits(2048.0f), 0x7c00});

  std::vector<float> floats = {1.0f, std::nanf(""), 3.0f};
  const std::vector<float> float_operand = {std::nanf(""), 2.0f, -4.0f};
  reduce_into(DataType::float32, ReduceOp::max, floats.data(), float_operand.data(), 3);
  CHECK(std::isnan(floats[0]));
  CHECK(std::isnan(floats[1]));
  CHECK(floats[2] == 3.0f);
}

TEST_CASE("reducing a buffer into itself doubles it", "[reduce]") {
  std::vector<int32_t> values(1001);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int32_t>(i) - 500;
  reduce_into(DataType::int32, ReduceOp::sum, values.data(), values.data(), values.size());
  for (size_t i = 0; i < values.size(); ++i) REQUIRE(values[i] == 2 * (static_cast<int32_t>(i) - 500));
}

TEST_CASE("invalid reductions throw InvalidArgument", "[reduce]") {
  std::vector<float> floats(16, 1.0f);
  for (ReduceOp op : {ReduceOp::band, ReduceOp::bor, ReduceOp::bxor}) {
    for (DataType type : {DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64}) {
      CHECK_THROWS_AS(reduce_into(type, op, floats.data(), floats.data() + 8, 2), InvalidArgument);
    }
  }
  CHECK(floats == std::vector<float>(16, 1.0f));
  CHECK_THROWS_AS(reduce_into(static_cast<DataType>(10), ReduceOp::sum, floats.data(), floats.data() + 8, 2),
                  InvalidArgument);
  CHECK_THROWS_AS(reduce_into(DataType::int32, static_cast<ReduceOp>(8), floats.data(), floats.data() + 8, 2),
                  InvalidArgument);
  CHECK_THROWS_AS(reduce_into(DataType::int32, ReduceOp::sum, nullptr, floats.data(), 2), InvalidArgument);
  CHECK_THROWS_AS(reduce_into(DataType::int32, ReduceOp::sum, floats.data(), nullptr, 2), InvalidArgument);
  CHECK_NOTHROW(reduce_into(DataType::int32, ReduceOp::sum, nullptr, nullptr, 0));
  CHECK_THROWS_WITH(reduce_into(DataType::float32, ReduceOp::sum, floats.data(), floats.data() + 4, 8),
                    Catch::Contains("partially overlap"));
  CHECK_THROWS_AS(reduce_into(DataType::float64, ReduceOp::sum, floats.data(), floats.data() + 8,
                              std::numeric_limits<size_t>::max() / 4),
                  InvalidArgument);
  CHECK_THROWS_AS(finish_average(DataType::int32, floats.data(), 4, 0), InvalidArgument);
  CHECK_THROWS_AS(finish_average(static_cast<DataType>(77), floats.data(), 4, 2), InvalidArgument);
}

TEST_CASE("finish_average on integers truncates toward zero", "[reduce]") {
  CHECK(averaged(DataType::int32, std::vector<int32_t>{7, -7, 8, -8, 1, -1, 0}, 2) ==
        std::vector<int32_t>{3, -3, 4, -4, 0, 0, 0});
  CHECK(averaged(DataType::int8, std::vector<int8_t>{-128, 127, -128, 5}, 128) == std::vector<int8_t>{-1, 0, -1, 0});
  CHECK(averaged(DataType::int8, std::vector<int8_t>{-128, 127}, 1000) == std::vector<int8_t>{0, 0});
  CHECK(averaged(DataType::uint8, std::vector<uint8_t>{255, 10}, 3) == std::vector<uint8_t>{85, 3});
  constexpr int64_t int64_min = std::numeric_limits<int64_t>::min();
  CHECK(averaged(DataType::int64, std::vector<int64_t>{int64_min, int64_min, -9}, 2) ==
        std::vector<int64_t>{int64_min / 2, int64_min / 2, -4});
  CHECK(averaged(DataType::int64, std::vector<int64_t>{int64_min, int64_min + 1}, size_t{1} << 63) ==
        std::vector<int64_t>{-1, 0});
  CHECK(averaged(DataType::uint64, std::vector<uint64_t>{~uint64_t{0}, 9}, std::numeric_limits<size_t>::max()) ==
        std::vector<uint64_t>{1, 0});
  CHECK(averaged(DataType::uint32, std::vector<uint32_t>{0xffffffffu, 100}, 1) ==
        std::vector<uint32_t>{0xffffffffu, 100});
}

TEST_CASE("finish_average on floating point types", "[reduce]") {
  CHECK(averaged(DataType::float32, std::vector<float>{6.0f, -3.0f, 1.0f}, 4) ==
        std::vector<float>{1.5f, -0.75f, 0.25f});
  CHECK(averaged(DataType::float64, std::vector<double>{1.0, 10.0}, 3) == std::vector<double>{1.0 / 3.0, 10.0 / 3.0});

  // 17 halves so both the 8-wide and the scalar tail paths run.
  std::vector<uint16_t> halves(17, float_to_half_bits(1.0f));
  halves[16] = float_to_half_bits(-6.0f);
  halves[3] = float_to_half_bits(-6.0f);
  halves = averaged(DataType::float16, halves, 3);
  for (size_t i = 0; i < halves.size(); ++i) {
    const uint16_t expected = (i == 3 || i == 16) ? float_to_half_bits(-2.0f) : uint16_t{0x3555};  // 1/3 rounded
    CHECK(halves[i] == expected);
  }
  std::vector<uint16_t> bfloats = {float_to_bfloat16_bits(1.0f), float_to_bfloat16_bits(12.0f)};
  CHECK(averaged(DataType::bfloat16, bfloats, 3) ==
        std::vector<uint16_t>{float_to_bfloat16_bits(1.0f / 3.0f), float_to_bfloat16_bits(4.0f)});
  CHECK(float_to_bfloat16_bits(1.0f / 3.0f) == 0x3eab);

  // Unaligned buffer of floats.
  std::vector<unsigned char> storage(4 * 300 + 8);
  for (size_t i = 0; i < 300; ++i) {
    const float value = static_cast<float>(i) * 4.0f;
    std::memcpy(storage.data() + 1 + i * 4, &value, 4);
  }
  finish_average(DataType::float32, storage.data() + 1, 300, 4);
  for (size_t i = 0; i < 300; ++i) {
    float value;
    std::memcpy(&value, storage.data() + 1 + i * 4, 4);
    REQUIRE(value == static_cast<float>(i));
  }
}

namespace {

// Finite values only for the floating point types: both sides combine the
// same operands in the same order, but a compiler may commute an addition,
// which changes which NaN's payload a NaN + NaN keeps.
void fill_operand(DataType type, std::vector<unsigned char>& bytes, size_t offset, size_t count, uint64_t seed) {
  for (size_t i = 0; i < count; ++i) {
    const uint64_t random = next_random(seed);
    const double finite = (static_cast<double>(random % 2001) - 1000.0) * 0.375;
    unsigned char* at = bytes.data() + offset + i * element_size(type);
    switch (type) {
      case DataType::float16: {
        const uint16_t bits = float_to_half_bits(static_cast<float>(finite));
        std::memcpy(at, &bits, sizeof bits);
        break;
      }
      case DataType::bfloat16: {
        const uint16_t bits = float_to_bfloat16_bits(static_cast<float>(finite));
        std::memcpy(at, &bits, sizeof bits);
        break;
      }
      case DataType::float32: {
        const auto value = static_cast<float>(finite);
        std::memcpy(at, &value, sizeof value);
        break;
      }
      case DataType::float64: std::memcpy(at, &finite, sizeof finite); break;
      default: std::memcpy(at, &random, element_size(type));
    }
  }
}

}  // namespace

TEST_CASE("reduce_pair_unchecked gives a copy and a reduction's bits, in place and out of place, aligned or not",
          "[reduce]") {
  const DataType types[] = {DataType::int8,   DataType::uint8,   DataType::int32,    DataType::uint32,
                            DataType::int64,  DataType::uint64,  DataType::float16,  DataType::bfloat16,
                            DataType::float32, DataType::float64};
  for (DataType type : types) {
    const size_t element = element_size(type);
    for (ReduceOp op : testing::all_reduce_ops) {
      if (is_bitwise(op) && is_floating_point(type)) continue;
      for (size_t count : {size_t{1}, size_t{7}, size_t{64}, size_t{1001}}) {
        // Offsets in bytes: all aligned, then each buffer misaligned in turn.
        for (const auto& [out_offset, first_offset, second_offset] :
             {std::tuple{8, 8, 8}, std::tuple{9, 8, 8}, std::tuple{8, 9, 8}, std::tuple{8, 8, 11}}) {
          INFO(to_string(type) << " " << to_string(op) << " count " << count << " offsets " << out_offset << "/"
                               << first_offset << "/" << second_offset);
          const size_t bytes = count * element;
          std::vector<unsigned char> first(bytes + 16), second(bytes + 16);
          fill_operand(type, first, static_cast<size_t>(first_offset), count, count * 7 + 1);
          fill_operand(type, second, static_cast<size_t>(second_offset), count, count * 7 + 2);

          std::vector<unsigned char> expected(bytes + 16, 0);
          std::memcpy(expected.data() + out_offset, first.data() + first_offset, bytes);
          reduce_unchecked(type, op, expected.data() + out_offset, second.data() + second_offset, count);

          std::vector<unsigned char> output(bytes + 16, 0);
          reduce_pair_unchecked(type, op, output.data() + out_offset, first.data() + first_offset,
                                second.data() + second_offset, count);
          CHECK(output == expected);  // the bytes around the result untouched too

          // In place: the output is the first operand.
          std::vector<unsigned char> in_place = first;
          reduce_pair_unchecked(type, op, in_place.data() + first_offset, in_place.data() + first_offset,
                                second.data() + second_offset, count);
          CHECK(std::memcmp(in_place.data() + first_offset, expected.data() + out_offset, bytes) == 0);
        }
      }
    }
  }
}
