#include "benchmarks/check_data.h"

#include <cstdint>
#include <cstring>

#include "base/half.h"
#include "oracle/reference_data.h"

namespace chorus::bench {
namespace {

// The value patterns of oracle/reference_data.h: small integers, so every
// type holds them exactly and sums, products, min and max of them are exact
// whatever the order; moved data differs between ranks and along the buffer,
// so a block landing in the wrong place is caught.
using oracle::moved_input;
using oracle::reduced_value;
using oracle::reduction_input;

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
        fill<T>(data, elements, [&](size_t i) { return reduction_input(op, rank, size, i); });
        break;
      case Operation::broadcast:
        // Non-roots start from a pattern the broadcast must overwrite.
        fill<T>(data, elements, [&](size_t i) { return rank == root ? moved_input(root, i) : int64_t{-1}; });
        break;
      default: fill<T>(data, elements, [&](size_t i) { return moved_input(rank, i); }); break;
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
      case Operation::broadcast: return compare<T>(output, count, [&](size_t i) { return moved_input(root, i); });
      case Operation::gather:
        if (rank != root) return 0;
        [[fallthrough]];
      case Operation::allgather:
        // Block r came from rank r's input.
        return compare<T>(output, count * static_cast<size_t>(size),
                          [&](size_t i) { return moved_input(static_cast<int>(i / count), i % count); });
      case Operation::scatter:
        return compare<T>(output, count, [&](size_t i) { return moved_input(root, own * count + i); });
      case Operation::alltoall:
        // Block p came from rank p's block number `rank`.
        return compare<T>(output, count * static_cast<size_t>(size),
                          [&](size_t i) { return moved_input(static_cast<int>(i / count), own * count + i % count); });
      case Operation::barrier: return 0;
    }
    return 0;
  });
}

}  // namespace chorus::bench
