// Element types and reduction operators every collective understands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace chorus {

enum class DataType : uint8_t {
  int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64,
};

enum class ReduceOp : uint8_t { sum, prod, min, max, avg, band, bor, bxor };

// How many members each has: a member's value is its index, so a loop to the
// count lists them all in order.
inline constexpr size_t data_type_count = static_cast<size_t>(DataType::float64) + 1;
inline constexpr size_t reduce_op_count = static_cast<size_t>(ReduceOp::bxor) + 1;

// IEEE binary16 and bfloat16 as raw bits; arithmetic goes through float.
struct float16_t { uint16_t bits; };
struct bfloat16_t { uint16_t bits; };

namespace detail {
inline constexpr size_t data_type_bytes[data_type_count] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
[[noreturn]] void throw_invalid_data_type(DataType type);
}  // namespace detail

// Bytes of one element. Inline: every call asks, several times. Throws
// InvalidArgument for a value outside the enum.
inline size_t element_size(DataType type) {
  const auto index = static_cast<size_t>(type);
  if (index >= data_type_count) detail::throw_invalid_data_type(type);
  return detail::data_type_bytes[index];
}
bool is_floating_point(DataType type);
std::string_view to_string(DataType type);
std::string_view to_string(ReduceOp op);
std::optional<DataType> parse_data_type(std::string_view name);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

// Throws InvalidArgument for meaningless pairs (bitwise ops on floating point types).
void validate_reduction(DataType type, ReduceOp op);
// Whether validate_reduction accepts the pair, for assertions below the checks.
bool is_valid_reduction(DataType type, ReduceOp op);

template <class T> constexpr DataType data_type_of();
template <> constexpr DataType data_type_of<int8_t>() { return DataType::int8; }
template <> constexpr DataType data_type_of<uint8_t>() { return DataType::uint8; }
template <> constexpr DataType data_type_of<int32_t>() { return DataType::int32; }
template <> constexpr DataType data_type_of<uint32_t>() { return DataType::uint32; }
template <> constexpr DataType data_type_of<int64_t>() { return DataType::int64; }
template <> constexpr DataType data_type_of<uint64_t>() { return DataType::uint64; }
template <> constexpr DataType data_type_of<float16_t>() { return DataType::float16; }
template <> constexpr DataType data_type_of<bfloat16_t>() { return DataType::bfloat16; }
template <> constexpr DataType data_type_of<float>() { return DataType::float32; }
template <> constexpr DataType data_type_of<double>() { return DataType::float64; }

}  // namespace chorus
