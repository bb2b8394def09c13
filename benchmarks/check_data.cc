#include "benchmarks/check_data.h"

#include <cstdint>
#include <cstring>

#include "base/half.h"

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

// Data that is only moved: differs between ranks and along the buffer, so a
// block landing in the wrong place is caught.
int64_t moved_value(int rank, size_t index) {
  return static_cast<int64_t>((index * 7 + static_cast<size_t>(rank) * 13 + 3) % 101);
}

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

constexpr std::string_view operation_names[] = {"allreduce", "broadcast", "reduce",  "allgather", "reduce_scatter",
                                                "gather",    "scatter",   "alltoall", "barrier"};

}  // namespace

std::optional<Operation> parse_operation(std::string_view name) {
  for (size_t i = 0; i < std::size(operation_names); ++i)
    if (operation_names[i] == name) return static_cast<Operation>(i);
  return std::nullopt;
}

std::string_view to_string(Operation operation) { return operation_names[static_cast<size_t>(operation)]; }

bool reduces(Operation operation) {
  return operation == Operation::allreduce || operation == Operation::reduce || operation == Operation::reduce_scatter;
}

bool has_root(Operation operation) {
  return operation == Operation::broadcast || operation == Operation::reduce || operation == Operation::gather ||
         operation == Operation::scatter;
}

size_t input_elements(Operation operation, int rank, int size, int root, size_t count) {
  const auto ranks = static_cast<size_t>(size);
  switch (operation) {
    case Operation::allreduce:
    case Operation::reduce:
    case Operation::broadcast:
    case Operation::allgather:
    case Operation::gather: return count;
    case Operation::reduce_scatter:
    case Operation::alltoall: return count * ranks;
    case Operation::scatter: return rank == root ? count * ranks : 0;
    case Operation::barrier: return 0;
  }
  return 0;
}

size_t output_elements(Operation operation, int rank, int size, int root, size_t count) {
  const auto ranks = static_cast<size_t>(size);
  switch (operation) {
    case Operation::allreduce:
    case Operation::reduce_scatter:
    case Operation::scatter: return count;
    case Operation::reduce: return rank == root ? count : 0;
    case Operation::allgather:
    case Operation::alltoall: return count * ranks;
    case Operation::gather: return rank == root ? count * ranks : 0;
    case Operation::broadcast:  // the data buffer is the input
    case Operation::barrier: return 0;
  }
  return 0;
}

void fill_input(Operation operation, DataType type, ReduceOp op, int rank, int size, int root, void* data,
                size_t count) {
  const size_t elements = input_elements(operation, rank, size, root, count);
  with_type(type, [&](auto tag) {
    using T = decltype(tag);
    switch (operation) {
      case Operation::allreduce:
      case Operation::reduce:
      case Operation::reduce_scatter:
        fill<T>(data, elements, [&](size_t i) { return input_value(op, rank, size, i); });
        break;
      case Operation::broadcast:
        // Non-roots start from a pattern the broadcast must overwrite.
        fill<T>(data, elements, [&](size_t i) { return rank == root ? moved_value(root, i) : int64_t{-1}; });
        break;
      default: fill<T>(data, elements, [&](size_t i) { return moved_value(rank, i); }); break;
    }
    return 0;
  });
}

size_t count_wrong(Operation operation, DataType type, ReduceOp op, int rank, int size, int root, const void* output,
                   size_t count) {
  const auto own = static_cast<size_t>(rank);
  return with_type(type, [&](auto tag) -> size_t {
    using T = decltype(tag);
    switch (operation) {
      case Operation::allreduce: return compare<T>(output, count, [&](size_t i) { return reduced_value(op, size, i); });
      case Operation::reduce:
        if (rank != root) return 0;
        return compare<T>(output, count, [&](size_t i) { return reduced_value(op, size, i); });
      case Operation::reduce_scatter:
        return compare<T>(output, count, [&](size_t i) { return reduced_value(op, size, own * count + i); });
      case Operation::broadcast: return compare<T>(output, count, [&](size_t i) { return moved_value(root, i); });
      case Operation::gather:
        if (rank != root) return 0;
        [[fallthrough]];
      case Operation::allgather:
        // Block r came from rank r's input.
        return compare<T>(output, count * static_cast<size_t>(size),
                          [&](size_t i) { return moved_value(static_cast<int>(i / count), i % count); });
      case Operation::scatter:
        return compare<T>(output, count, [&](size_t i) { return moved_value(root, own * count + i); });
      case Operation::alltoall:
        // Block p came from rank p's block number `rank`.
        return compare<T>(output, count * static_cast<size_t>(size),
                          [&](size_t i) { return moved_value(static_cast<int>(i / count), own * count + i % count); });
      case Operation::barrier: return 0;
    }
    return 0;
  });
}

}  // namespace chorus::bench
