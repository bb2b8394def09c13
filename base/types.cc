// Names, sizes and validity rules for DataType and ReduceOp.
#include "base/types.h"

#include <array>
#include <string>

#include "base/error.h"

namespace chorus {
namespace {

constexpr std::array<std::string_view, data_type_count> data_type_names = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64",
};
constexpr std::array<std::string_view, reduce_op_count> reduce_op_names = {
    "sum", "prod", "min", "max", "avg", "band", "bor", "bxor",
};

struct DataTypeAlias {
  std::string_view name;
  DataType type;
};
// Spellings people bring from numpy, PyTorch and C.
constexpr DataTypeAlias data_type_aliases[] = {
    {"half", DataType::float16},  {"fp16", DataType::float16}, {"bf16", DataType::bfloat16},
    {"float", DataType::float32}, {"fp32", DataType::float32}, {"double", DataType::float64},
    {"fp64", DataType::float64},  {"int", DataType::int32},
};

struct ReduceOpAlias {
  std::string_view name;
  ReduceOp op;
};
constexpr ReduceOpAlias reduce_op_aliases[] = {
    {"product", ReduceOp::prod}, {"mean", ReduceOp::avg}, {"average", ReduceOp::avg},
    {"and", ReduceOp::band},     {"or", ReduceOp::bor},   {"xor", ReduceOp::bxor},
};

bool valid(DataType type) { return static_cast<size_t>(type) < data_type_count; }
bool valid(ReduceOp op) { return static_cast<size_t>(op) < reduce_op_count; }

bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
}

std::string invalid_data_type_message(DataType type) {
  return "invalid data type value " + std::to_string(static_cast<int>(type)) +
         " (expected one of int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64)";
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

namespace detail {
void throw_invalid_data_type(DataType type) { throw InvalidArgument(invalid_data_type_message(type)); }
}  // namespace detail

bool is_floating_point(DataType type) {
  switch (type) {
    case DataType::float16:
    case DataType::bfloat16:
    case DataType::float32:
    case DataType::float64:
      return true;
    default:
      return false;
  }
}

std::string_view to_string(DataType type) {
  return valid(type) ? data_type_names[static_cast<size_t>(type)] : std::string_view("invalid-data-type");
}

std::string_view to_string(ReduceOp op) {
  return valid(op) ? reduce_op_names[static_cast<size_t>(op)] : std::string_view("invalid-reduce-op");
}

std::optional<DataType> parse_data_type(std::string_view name) {
  const std::string key = lowercase(name);
  for (size_t i = 0; i < data_type_count; ++i) {
    if (key == data_type_names[i]) return static_cast<DataType>(i);
  }
  for (const DataTypeAlias& alias : data_type_aliases) {
    if (key == alias.name) return alias.type;
  }
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  const std::string key = lowercase(name);
  for (size_t i = 0; i < reduce_op_count; ++i) {
    if (key == reduce_op_names[i]) return static_cast<ReduceOp>(i);
  }
  for (const ReduceOpAlias& alias : reduce_op_aliases) {
    if (key == alias.name) return alias.op;
  }
  return std::nullopt;
}

bool is_valid_reduction(DataType type, ReduceOp op) {
  return valid(type) && valid(op) && !(is_bitwise(op) && is_floating_point(type));
}

void validate_reduction(DataType type, ReduceOp op) {
  if (!valid(type)) {
    throw InvalidArgument(invalid_data_type_message(type));
  }
  if (!valid(op)) {
    throw InvalidArgument("invalid reduce op value " + std::to_string(static_cast<int>(op)) +
                          " (expected one of sum, prod, min, max, avg, band, bor, bxor)");
  }
  if (is_bitwise(op) && is_floating_point(type)) {
    throw InvalidArgument("reduce op '" + std::string(to_string(op)) + "' is not defined for data type '" +
                          std::string(to_string(type)) + "': " + std::string(to_string(type)) +
                          " allows sum, prod, min, max, avg; band, bor and bxor need an integer type "
                          "(int8, uint8, int32, uint32, int64, uint64)");
  }
}

}  // namespace chorus
