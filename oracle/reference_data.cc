#include "oracle/reference_data.h"

#include <cstring>

#include "base/half.h"

namespace chorus::oracle {
namespace {

void store(DataType type, std::byte* base, size_t index, int64_t value) {
  auto put = [&](auto element) { std::memcpy(base + index * sizeof(element), &element, sizeof(element)); };
  switch (type) {
    case DataType::int8: put(static_cast<int8_t>(value)); break;
    case DataType::uint8: put(static_cast<uint8_t>(value)); break;
    case DataType::int32: put(static_cast<int32_t>(value)); break;
    case DataType::uint32: put(static_cast<uint32_t>(value)); break;
    case DataType::int64: put(static_cast<int64_t>(value)); break;
    case DataType::uint64: put(static_cast<uint64_t>(value)); break;
    case DataType::float16: put(to_float16(static_cast<float>(value))); break;
    case DataType::bfloat16: put(to_bfloat16(static_cast<float>(value))); break;
    case DataType::float32: put(static_cast<float>(value)); break;
    case DataType::float64: put(static_cast<double>(value)); break;
  }
}

bool reduces(Collective collective) {
  return collective == Collective::allreduce || collective == Collective::reduce ||
         collective == Collective::reduce_scatter;
}

int64_t reduced_value_of(const Call& call, size_t index) { return reduced_value(call.op, call.size, index); }

size_t sum(const std::vector<size_t>& counts, size_t first, size_t last) {
  size_t total = 0;
  for (size_t i = first; i < last; ++i) total += counts[i];
  return total;
}

// alltoall: elements rank `from` sends to each peer.
std::vector<size_t> send_counts_of(const Call& call, int from) {
  if (call.send_counts.empty()) return std::vector<size_t>(static_cast<size_t>(call.size), call.count);
  std::vector<size_t> counts(static_cast<size_t>(call.size));
  for (int to = 0; to < call.size; ++to) counts[static_cast<size_t>(to)] = alltoallv_count(from, to, call.count);
  return counts;
}

}  // namespace

size_t alltoallv_count(int from, int to, size_t scale) {
  return static_cast<size_t>((from + 2 * to) % 3) * (scale + 1);
}

int64_t reduction_input(ReduceOp op, int rank, int size, size_t index) {
  switch (op) {
    case ReduceOp::sum: return static_cast<int64_t>(index % 5) + rank % 3;
    case ReduceOp::prod: return (rank < 3 && (index + static_cast<size_t>(rank)) % 2 == 0) ? 2 : 1;
    case ReduceOp::min:
    case ReduceOp::max: return static_cast<int64_t>((index * 7 + static_cast<size_t>(rank) * 13) % 29);
    case ReduceOp::avg: return static_cast<int64_t>(index % 5) + (rank == 0 ? size : 0);
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor: return static_cast<int64_t>((index * 31 + static_cast<size_t>(rank) * 17) & 0x7f);
  }
  return 0;
}

int64_t reduced_value(ReduceOp op, int size, size_t index) {
  int64_t result = reduction_input(op, 0, size, index);
  for (int rank = 1; rank < size; ++rank) {
    const int64_t value = reduction_input(op, rank, size, index);
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
  return op == ReduceOp::avg ? result / size : result;
}

int64_t moved_input(int rank, size_t index) {
  return static_cast<int64_t>((index * 7 + static_cast<size_t>(rank) * 13 + 3) % 101);
}

int64_t input_value(const Call& call, int rank, size_t index, size_t salt) {
  if (!reduces(call.collective)) return moved_input(rank, index + salt);
  return reduction_input(call.op, rank, call.size, index + salt);
}

size_t input_elements(const Call& call) {
  const bool root = call.rank == call.root;
  switch (call.collective) {
    case Collective::allreduce:
    case Collective::reduce:
    case Collective::send: return call.count;
    case Collective::broadcast:
    case Collective::barrier:
    case Collective::recv: return 0;
    case Collective::allgather:
    case Collective::gather: return call.block_count(call.rank);
    case Collective::scatter: return root ? call.total_count() : 0;
    case Collective::reduce_scatter: return call.total_count();
    case Collective::alltoall: {
      auto counts = send_counts_of(call, call.rank);
      return sum(counts, 0, counts.size());
    }
  }
  return 0;
}

size_t output_elements(const Call& call) {
  const bool root = call.rank == call.root;
  switch (call.collective) {
    case Collective::allreduce:
    case Collective::broadcast:
    case Collective::recv: return call.count;
    case Collective::reduce: return root ? call.count : 0;
    case Collective::barrier:
    case Collective::send: return 0;
    case Collective::allgather: return call.total_count();
    case Collective::gather: return root ? call.total_count() : 0;
    case Collective::scatter:
    case Collective::reduce_scatter: return call.block_count(call.rank);
    case Collective::alltoall: {
      size_t total = 0;
      for (int from = 0; from < call.size; ++from) total += send_counts_of(call, from)[static_cast<size_t>(call.rank)];
      return total;
    }
  }
  return 0;
}

std::vector<std::byte> input_bytes_of(const Call& call, int rank, size_t salt) {
  Call of_rank = call;
  of_rank.rank = rank;
  const size_t elements = input_elements(of_rank);
  std::vector<std::byte> bytes(elements * call.element_bytes());
  if (call.collective == Collective::broadcast && rank == call.root) bytes.resize(call.bytes());
  const size_t filled = bytes.size() / call.element_bytes();
  for (size_t i = 0; i < filled; ++i) store(call.type, bytes.data(), i, input_value(call, rank, i, salt));
  return bytes;
}

std::vector<std::byte> expected_output(const Call& call, size_t salt) {
  const size_t elements = output_elements(call);
  std::vector<std::byte> bytes(elements * call.element_bytes());
  std::byte* out = bytes.data();
  const auto rank_index = static_cast<size_t>(call.rank);
  switch (call.collective) {
    case Collective::allreduce:
    case Collective::reduce:
      for (size_t i = 0; i < elements; ++i) store(call.type, out, i, reduced_value_of(call, i + salt));
      break;
    case Collective::reduce_scatter: {
      const size_t offset = call.block_offset(call.rank);
      for (size_t i = 0; i < elements; ++i) store(call.type, out, i, reduced_value_of(call, offset + i + salt));
      break;
    }
    case Collective::broadcast:
    case Collective::recv:
      for (size_t i = 0; i < elements; ++i) store(call.type, out, i, input_value(call, call.root, i, salt));
      break;
    case Collective::allgather:
    case Collective::gather:
      if (elements == 0) break;  // gather: not root
      for (int from = 0; from < call.size; ++from) {
        const size_t offset = call.block_offset(from);
        for (size_t j = 0; j < call.block_count(from); ++j)
          store(call.type, out, offset + j, input_value(call, from, j, salt));
      }
      break;
    case Collective::scatter: {
      const size_t offset = call.block_offset(call.rank);
      for (size_t j = 0; j < elements; ++j) store(call.type, out, j, input_value(call, call.root, offset + j, salt));
      break;
    }
    case Collective::alltoall: {
      size_t at = 0;
      for (int from = 0; from < call.size; ++from) {
        const std::vector<size_t> sent = send_counts_of(call, from);
        const size_t offset = sum(sent, 0, rank_index);
        for (size_t j = 0; j < sent[rank_index]; ++j) store(call.type, out, at++, input_value(call, from, offset + j, salt));
      }
      break;
    }
    case Collective::barrier:
    case Collective::send: break;
  }
  return bytes;
}

size_t first_difference(DataType type, const std::vector<std::byte>& expected, const std::byte* actual) {
  const size_t element = element_size(type);
  for (size_t i = 0; i < expected.size(); i += element)
    if (std::memcmp(expected.data() + i, actual + i, element) != 0) return i / element;
  return expected.size() / element;
}

std::string element_text(DataType type, const std::byte* element) {
  auto load = [&](auto value) {
    std::memcpy(&value, element, sizeof(value));
    return value;
  };
  std::string value;
  switch (type) {
    case DataType::int8: value = std::to_string(load(int8_t{})); break;
    case DataType::uint8: value = std::to_string(load(uint8_t{})); break;
    case DataType::int32: value = std::to_string(load(int32_t{})); break;
    case DataType::uint32: value = std::to_string(load(uint32_t{})); break;
    case DataType::int64: value = std::to_string(load(int64_t{})); break;
    case DataType::uint64: value = std::to_string(load(uint64_t{})); break;
    case DataType::float16: value = std::to_string(to_float(load(float16_t{}))); break;
    case DataType::bfloat16: value = std::to_string(to_float(load(bfloat16_t{}))); break;
    case DataType::float32: value = std::to_string(load(float{})); break;
    case DataType::float64: value = std::to_string(load(double{})); break;
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex = "0x";
  // Most significant byte first (x86 is little-endian).
  for (size_t i = element_size(type); i-- > 0;) {
    const auto byte = static_cast<unsigned>(element[i]);
    hex += digits[byte >> 4];
    hex += digits[byte & 0xf];
  }
  return value + " (" + hex + ")";
}

}  // namespace chorus::oracle
