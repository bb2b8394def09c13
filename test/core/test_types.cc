// DataType / ReduceOp names, sizes, parsing and the validity rules.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.h"
#include "base/types.h"
#include "test/core/all_reduce_ops.h"

using namespace chorus;

namespace {

const DataType all_types[] = {DataType::int8,    DataType::uint8,    DataType::int32,   DataType::uint32,
                              DataType::int64,   DataType::uint64,   DataType::float16, DataType::bfloat16,
                              DataType::float32, DataType::float64};

std::string message_of(DataType type, ReduceOp op) {
  try {
    validate_reduction(type, op);
  } catch (const InvalidArgument& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("element sizes and floating point classification", "[types]") {
  CHECK(element_size(DataType::int8) == 1);
  CHECK(element_size(DataType::uint8) == 1);
  CHECK(element_size(DataType::int32) == 4);
  CHECK(element_size(DataType::uint32) == 4);
  CHECK(element_size(DataType::int64) == 8);
  CHECK(element_size(DataType::uint64) == 8);
  CHECK(element_size(DataType::float16) == 2);
  CHECK(element_size(DataType::bfloat16) == 2);
  CHECK(element_size(DataType::float32) == 4);
  CHECK(element_size(DataType::float64) == 8);
  CHECK(element_size(data_type_of<float16_t>()) == sizeof(float16_t));
  CHECK(element_size(data_type_of<double>()) == sizeof(double));
  CHECK_THROWS_AS(element_size(static_cast<DataType>(200)), InvalidArgument);

  for (DataType type : all_types) {
    const bool floating = type == DataType::float16 || type == DataType::bfloat16 || type == DataType::float32 ||
                          type == DataType::float64;
    CHECK(is_floating_point(type) == floating);
  }
}

TEST_CASE("names round trip through to_string and parse", "[types]") {
  const char* type_names[] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
                              "uint64",  "float16",  "bfloat16", "float32", "float64"};
  for (size_t i = 0; i < 10; ++i) {
    CHECK(to_string(all_types[i]) == type_names[i]);
    CHECK(parse_data_type(type_names[i]) == all_types[i]);
  }
  const char* op_names[] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};
  for (size_t i = 0; i < 8; ++i) {
    CHECK(to_string(testing::all_reduce_ops[i]) == op_names[i]);
    CHECK(parse_reduce_op(op_names[i]) == testing::all_reduce_ops[i]);
  }
  CHECK(to_string(static_cast<DataType>(99)) == "invalid-data-type");
  CHECK(to_string(static_cast<ReduceOp>(99)) == "invalid-reduce-op");
}

TEST_CASE("aliases and unknown names", "[types]") {
  CHECK(parse_data_type("half") == DataType::float16);
  CHECK(parse_data_type("fp16") == DataType::float16);
  CHECK(parse_data_type("bf16") == DataType::bfloat16);
  CHECK(parse_data_type("float") == DataType::float32);
  CHECK(parse_data_type("fp32") == DataType::float32);
  CHECK(parse_data_type("double") == DataType::float64);
  CHECK(parse_data_type("fp64") == DataType::float64);
  CHECK(parse_data_type("int") == DataType::int32);
  CHECK(parse_data_type("Float32") == DataType::float32);
  CHECK(parse_data_type("BF16") == DataType::bfloat16);
  CHECK_FALSE(parse_data_type("").has_value());
  CHECK_FALSE(parse_data_type("float128").has_value());
  CHECK_FALSE(parse_data_type("int16").has_value());
  CHECK_FALSE(parse_data_type("float32 ").has_value());

  CHECK(parse_reduce_op("SUM") == ReduceOp::sum);
  CHECK(parse_reduce_op("mean") == ReduceOp::avg);
  CHECK(parse_reduce_op("xor") == ReduceOp::bxor);
  CHECK_FALSE(parse_reduce_op("").has_value());
  CHECK_FALSE(parse_reduce_op("median").has_value());
}

TEST_CASE("validate_reduction accepts every meaningful pair", "[types]") {
  for (DataType type : all_types) {
    for (ReduceOp op : testing::all_reduce_ops) {
      const bool bitwise = op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
      INFO(to_string(type) << " " << to_string(op));
      if (bitwise && is_floating_point(type)) {
        CHECK_THROWS_AS(validate_reduction(type, op), InvalidArgument);
      } else {
        CHECK_NOTHROW(validate_reduction(type, op));
      }
    }
  }
}

TEST_CASE("validate_reduction explains what is allowed", "[types]") {
  const std::string message = message_of(DataType::bfloat16, ReduceOp::bxor);
  CHECK_THAT(message, Catch::Contains("bxor") && Catch::Contains("bfloat16") &&
                          Catch::Contains("sum, prod, min, max, avg") && Catch::Contains("int64"));
  CHECK_THAT(message_of(static_cast<DataType>(10), ReduceOp::sum), Catch::Contains("invalid data type value 10"));
  CHECK_THAT(message_of(DataType::int32, static_cast<ReduceOp>(8)), Catch::Contains("invalid reduce op value 8"));
  CHECK_THAT(message_of(static_cast<DataType>(255), ReduceOp::band), Catch::Contains("255"));
}
