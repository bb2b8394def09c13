#include "benchmarks/check_data.h"

#include <cstdint>
#include <cstring>

#include "chorus/half.h"

namespace chorus::bench {
namespace {

// Every generated value is a small integer, so every type holds it exactly
// and sums, products, min and max of them are exact whatever the order.
int64_t input_value(ReduceOp op, int rank, int size, size_t index) {
  switch (op) {
    case ReduceOp::sum: return static_cast<int64_t>(index % 5) + rank % 3;
    case ReduceOp::prod: return (rank < 3 && (index + static_cast<size_t>(rank)) % 2 == 0) ? 2 : 1;
    case ReduceOp::min:
    case ReduceOp::max: return static_cast<int64_t>((index * 7 + static_cast<size_t>(rank) * 13) % 29);
    // Rank 0 adds `size`, so the average is exactly (index % 5) + 1.
    case ReduceOp::avg: return static_cast<int64_t>(index % 5) + (rank == 0 ? size : 0);
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor: return static_cast<int64_t>((index * 31 + static_cast<size_t>(rank) * 17) & 0x7f);
  }
  return 0;
}

int64_t reduced_value(ReduceOp op, int size, size_t index) {
  int64_t result = input_value(op, 0, size, index);
  for (int rank = 1; rank < size; ++rank) {
    int64_t value = input_value(op, rank, size, index);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: result += value; break;
      case ReduceOp::prod: result *= value; break;
      case ReduceOp::min: result = value < result ? value : result; break;
      case ReduceOp::max: result = value > result ? value : result; break;
      case ReduceOp::band: result &= value; break;
      case ReduceOp::bor: result |= value; break;
      case ReduceOp::bxor: result ^= value; break;
    }
  }
  if (op == ReduceOp::avg) result /= size;
  return result;
}

int64_t broadcast_value(size_t index) { return static_cast<int64_t>((index * 7 + 3) % 101); }

template <class T>
T to_element(int64_t value) {
  if constexpr (std::is_same_v<T, float16_t>) {
    return to_float16(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return to_bfloat16(static_cast<float>(value));
  } else {
    return static_cast<T>(value);
  }
}

template <class T, class Generate>
void fill(void* data, size_t count, Generate&& generate) {
  T* elements = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) elements[i] = to_element<T>(generate(i));
}

template <class T, class Generate>
size_t compare(const void* data, size_t count, Generate&& generate) {
  const T* elements = static_cast<const T*>(data);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    T expected = to_element<T>(generate(i));
    wrong += std::memcmp(&expected, &elements[i], sizeof(T)) != 0;
  }
  return wrong;
}

template <class Visit>
auto with_type(DataType type, Visit&& visit) {
  switch (type) {
    case DataType::int8: return visit(int8_t{});
    case DataType::uint8: return visit(uint8_t{});
    case DataType::int32: return visit(int32_t{});
    case DataType::uint32: return visit(uint32_t{});
    case DataType::int64: return visit(int64_t{});
    case DataType::uint64: return visit(uint64_t{});
    case DataType::float16: return visit(float16_t{});
    case DataType::bfloat16: return visit(bfloat16_t{});
    case DataType::float32: return visit(float{});
    case DataType::float64: return visit(double{});
  }
  return visit(uint8_t{});
}

}  // namespace

void fill_input(Operation operation, DataType type, ReduceOp op, int rank, int size, int root, void* data,
                size_t count) {
  with_type(type, [&](auto tag) {
    using T = decltype(tag);
    if (operation == Operation::allreduce) {
      fill<T>(data, count, [&](size_t i) { return input_value(op, rank, size, i); });
    } else if (operation == Operation::broadcast) {
      // Non-roots start from a pattern the broadcast must overwrite.
      fill<T>(data, count, [&](size_t i) { return rank == root ? broadcast_value(i) : int64_t{-1}; });
    }
    return 0;
  });
}

size_t count_wrong(Operation operation, DataType type, ReduceOp op, int /*rank*/, int size, int /*root*/,
                   const void* output, size_t count) {
  return with_type(type, [&](auto tag) -> size_t {
    using T = decltype(tag);
    if (operation == Operation::allreduce) return compare<T>(output, count, [&](size_t i) { return reduced_value(op, size, i); });
    if (operation == Operation::broadcast) return compare<T>(output, count, broadcast_value);
    return 0;
  });
}

}  // namespace chorus::bench
