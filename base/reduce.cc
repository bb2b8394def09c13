// Element-wise reduction kernels. Each kernel is a plain loop over __restrict
// pointers so g++ -O3 vectorises it; the type/op switch happens once per call,
// never per element.
#include "base/reduce.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "base/half.h"
#include "base/reduce_16bit_x86.h"
#include "base/reduce_ops.h"

namespace chorus {
namespace {

using namespace reduce_ops;

// Elements staged per bounce block: 2 KiB of int64 stays in L1 next to its partner.
constexpr size_t bounce_elements = 256;

struct Float16Format {
  static float to_float(uint16_t bits) { return half_bits_to_float(bits); }
  static uint16_t from_float(float value) { return float_to_half_bits(value); }
};

struct BFloat16Format {
  static float to_float(uint16_t bits) { return bfloat16_bits_to_float(bits); }
  static uint16_t from_float(float value) { return float_to_bfloat16_bits(value); }
};

// The native types' loops, compiled twice on x86: for baseline x86-64, whose
// 16-byte vectors the library targets, and for AVX2, taken at run time
// where the CPU has it. Why: on the AMD EPYC VM (Zen 4) a float32 sum of two
// buffers into a third ran 58-60 GB/s at 32-256 KiB with 16-byte vectors
// and 67-80 with 32-byte ones, and the board's allreduce reduces 32 KiB
// chunks at those sizes. Each element is one operation either way (no FMA:
// avx2 does not enable it), so both give the same bits.
#if defined(__x86_64__) && defined(__GNUC__)
#define CHORUS_X86_AVX2_NATIVE_KERNELS 1
bool cpu_has_avx2() {
  static const bool supported = __builtin_cpu_supports("avx2");
  return supported;
}
#define CHORUS_AVX2_CLONE __attribute__((target("avx2")))
#endif

template <class T, class Op>
[[gnu::always_inline]] inline void combine_native_loop(T* __restrict accumulator, const T* __restrict operand,
                                                       size_t count, Op op) {
  for (size_t i = 0; i < count; ++i) accumulator[i] = op(accumulator[i], operand[i]);
}

template <class T, class Op>
[[gnu::always_inline]] inline void combine_pair_loop(T* __restrict output, const T* __restrict first,
                                                     const T* __restrict second, size_t count, Op op) {
  for (size_t i = 0; i < count; ++i) output[i] = op(first[i], second[i]);
}

#ifdef CHORUS_X86_AVX2_NATIVE_KERNELS
template <class T, class Op>
CHORUS_AVX2_CLONE void combine_native_avx2(T* __restrict accumulator, const T* __restrict operand, size_t count,
                                           Op op) {
  combine_native_loop(accumulator, operand, count, op);
}

template <class T, class Op>
CHORUS_AVX2_CLONE void combine_pair_avx2(T* __restrict output, const T* __restrict first, const T* __restrict second,
                                         size_t count, Op op) {
  combine_pair_loop(output, first, second, count, op);
}
#endif

template <class T, class Op>
void combine_native(T* __restrict accumulator, const T* __restrict operand, size_t count, Op op) {
#ifdef CHORUS_X86_AVX2_NATIVE_KERNELS
  if (cpu_has_avx2()) return combine_native_avx2(accumulator, operand, count, op);
#endif
  combine_native_loop(accumulator, operand, count, op);
}

// 16-bit floats are widened, combined in float and rounded back per element.
// Float has more than twice the precision of either format, so the double
// rounding still gives the correctly rounded 16-bit result of a + b and a * b.
template <class Format, class Op>
void combine_16bit(uint16_t* __restrict accumulator, const uint16_t* __restrict operand, size_t count, Op op) {
  for (size_t i = 0; i < count; ++i) {
    accumulator[i] = Format::from_float(op(Format::to_float(accumulator[i]), Format::to_float(operand[i])));
  }
}

bool aligned_for(const void* pointer, size_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

// Runs kernel(T* accumulator, const T* operand, n) over the buffers. Network
// receive buffers can sit at any byte offset, and the vectorised loops may
// assume natural alignment, so misaligned (or identical) buffers go through
// small aligned copies instead.
template <class T, class Kernel>
void for_aligned_pair(void* accumulator, const void* operand, size_t count, Kernel kernel) {
  if (accumulator != operand && aligned_for(accumulator, alignof(T)) && aligned_for(operand, alignof(T))) {
    kernel(static_cast<T*>(accumulator), static_cast<const T*>(operand), count);
    return;
  }
  alignas(64) T staged_accumulator[bounce_elements];
  alignas(64) T staged_operand[bounce_elements];
  auto* accumulator_bytes = static_cast<unsigned char*>(accumulator);
  const auto* operand_bytes = static_cast<const unsigned char*>(operand);
  for (size_t start = 0; start < count; start += bounce_elements) {
    const size_t bytes = std::min(bounce_elements, count - start) * sizeof(T);
    std::memcpy(staged_accumulator, accumulator_bytes + start * sizeof(T), bytes);
    std::memcpy(staged_operand, operand_bytes + start * sizeof(T), bytes);
    kernel(staged_accumulator, staged_operand, bytes / sizeof(T));
    std::memcpy(accumulator_bytes + start * sizeof(T), staged_accumulator, bytes);
  }
}

template <class T, class Kernel>
void for_aligned(void* data, size_t count, Kernel kernel) {
  if (aligned_for(data, alignof(T))) {
    kernel(static_cast<T*>(data), count);
    return;
  }
  alignas(64) T staged[bounce_elements];
  auto* data_bytes = static_cast<unsigned char*>(data);
  for (size_t start = 0; start < count; start += bounce_elements) {
    const size_t bytes = std::min(bounce_elements, count - start) * sizeof(T);
    std::memcpy(staged, data_bytes + start * sizeof(T), bytes);
    kernel(staged, bytes / sizeof(T));
    std::memcpy(data_bytes + start * sizeof(T), staged, bytes);
  }
}

template <class T, class Op>
void combine_pair_native(T* __restrict output, const T* __restrict first, const T* __restrict second, size_t count,
                         Op op) {
#ifdef CHORUS_X86_AVX2_NATIVE_KERNELS
  if (cpu_has_avx2()) return combine_pair_avx2(output, first, second, count, op);
#endif
  combine_pair_loop(output, first, second, count, op);
}

// One pass for the native types on aligned buffers; false where the caller
// takes two (a copy, then reduce_unchecked).
template <class Op>
bool reduce_pair_with(DataType type, void* output, const void* first, const void* second, size_t count, Op op) {
  const auto run = [&]<class T>(T*) {
    if (!aligned_for(output, alignof(T)) || !aligned_for(first, alignof(T)) || !aligned_for(second, alignof(T)))
      return false;
    combine_pair_native(static_cast<T*>(output), static_cast<const T*>(first), static_cast<const T*>(second), count,
                        op);
    return true;
  };
  switch (type) {
    case DataType::int8: return run(static_cast<int8_t*>(nullptr));
    case DataType::uint8: return run(static_cast<uint8_t*>(nullptr));
    case DataType::int32: return run(static_cast<int32_t*>(nullptr));
    case DataType::uint32: return run(static_cast<uint32_t*>(nullptr));
    case DataType::int64: return run(static_cast<int64_t*>(nullptr));
    case DataType::uint64: return run(static_cast<uint64_t*>(nullptr));
    default: break;
  }
  if constexpr (Op::for_floating_point) {
    switch (type) {
      case DataType::float32: return run(static_cast<float*>(nullptr));
      case DataType::float64: return run(static_cast<double*>(nullptr));
      default: break;  // 16-bit floats: two passes through their widening kernels
    }
  }
  return false;
}

template <class T, class Op>
void reduce_native(void* accumulator, const void* operand, size_t count, Op op) {
  for_aligned_pair<T>(accumulator, operand, count, [op](T* a, const T* b, size_t n) { combine_native(a, b, n, op); });
}

template <class Format, class Op>
void combine_16bit_fastest(uint16_t* __restrict accumulator, const uint16_t* __restrict operand, size_t count, Op op) {
#ifdef CHORUS_X86_16BIT_KERNELS
  if (x86::cpu_has_avx2_and_f16c()) {
    if constexpr (std::is_same_v<Format, BFloat16Format>) {
      x86::combine_bfloat16(accumulator, operand, count, op);
      return;
    } else {
      const size_t done = x86::combine_float16(accumulator, operand, count, op);
      combine_16bit<Format>(accumulator + done, operand + done, count - done, op);
      return;
    }
  }
#endif
  combine_16bit<Format>(accumulator, operand, count, op);
}

template <class Format, class Op>
void reduce_16bit(void* accumulator, const void* operand, size_t count, Op op) {
  for_aligned_pair<uint16_t>(accumulator, operand, count, [op](uint16_t* a, const uint16_t* b, size_t n) {
    combine_16bit_fastest<Format>(a, b, n, op);
  });
}

template <class Op>
void reduce_with(DataType type, void* accumulator, const void* operand, size_t count, Op op) {
  switch (type) {
    case DataType::int8: return reduce_native<int8_t>(accumulator, operand, count, op);
    case DataType::uint8: return reduce_native<uint8_t>(accumulator, operand, count, op);
    case DataType::int32: return reduce_native<int32_t>(accumulator, operand, count, op);
    case DataType::uint32: return reduce_native<uint32_t>(accumulator, operand, count, op);
    case DataType::int64: return reduce_native<int64_t>(accumulator, operand, count, op);
    case DataType::uint64: return reduce_native<uint64_t>(accumulator, operand, count, op);
    default: break;
  }
  if constexpr (Op::for_floating_point) {
    switch (type) {
      case DataType::float16: return reduce_16bit<Float16Format>(accumulator, operand, count, op);
      case DataType::bfloat16: return reduce_16bit<BFloat16Format>(accumulator, operand, count, op);
      case DataType::float32: return reduce_native<float>(accumulator, operand, count, op);
      case DataType::float64: return reduce_native<double>(accumulator, operand, count, op);
      default: break;
    }
  }
  // validate_reduction rejected every other pair before we got here.
  throw InvalidArgument("reduce_into: no kernel for data type " + std::string(to_string(type)));
}

template <class T>
void divide_integers(T* data, size_t count, size_t contributors) {
  for (size_t i = 0; i < count; ++i) data[i] = divide_integer(data[i], contributors);
}

template <class T>
void divide_floats(T* __restrict data, size_t count, size_t contributors) {
  const T divisor = static_cast<T>(contributors);
  for (size_t i = 0; i < count; ++i) data[i] = data[i] / divisor;
}

template <class Format>
void divide_16bit(uint16_t* __restrict data, size_t count, size_t contributors) {
  const float divisor = static_cast<float>(contributors);
  size_t i = 0;
#ifdef CHORUS_X86_16BIT_KERNELS
  if (std::is_same_v<Format, Float16Format> && x86::cpu_has_avx2_and_f16c()) i = x86::divide_float16(data, count, divisor);
#endif
  for (; i < count; ++i) data[i] = Format::from_float(Format::to_float(data[i]) / divisor);
}

template <class T>
void average_integers(void* data, size_t count, size_t contributors) {
  for_aligned<T>(data, count, [contributors](T* d, size_t n) { divide_integers(d, n, contributors); });
}

template <class T>
void average_floats(void* data, size_t count, size_t contributors) {
  for_aligned<T>(data, count, [contributors](T* d, size_t n) { divide_floats(d, n, contributors); });
}

template <class Format>
void average_16bit(void* data, size_t count, size_t contributors) {
  for_aligned<uint16_t>(data, count, [contributors](uint16_t* d, size_t n) { divide_16bit<Format>(d, n, contributors); });
}

void check_addressable(const char* what, const void* pointer, size_t count, DataType type) {
  if (count > std::numeric_limits<size_t>::max() / element_size(type)) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(count) + " elements of " +
                          std::string(to_string(type)) + " exceed the address space");
  }
  if (pointer == nullptr && count > 0) {
    throw InvalidArgument(std::string(what) + ": null buffer for " + std::to_string(count) + " elements of " +
                          std::string(to_string(type)));
  }
}

}  // namespace

void reduce_into(DataType type, ReduceOp op, void* accumulator, const void* operand, size_t count) {
  validate_reduction(type, op);
  check_addressable("reduce_into accumulator", accumulator, count, type);
  check_addressable("reduce_into operand", operand, count, type);
  if (count == 0) return;

  // Identical buffers are fine (x op x); a partial overlap means the caller
  // mixed up its offsets and the result would depend on loop order.
  const size_t bytes = count * element_size(type);
  const auto accumulator_address = reinterpret_cast<uintptr_t>(accumulator);
  const auto operand_address = reinterpret_cast<uintptr_t>(operand);
  if (accumulator_address != operand_address && accumulator_address < operand_address + bytes &&
      operand_address < accumulator_address + bytes) {
    throw InvalidArgument("reduce_into: accumulator and operand buffers partially overlap (" + std::to_string(bytes) +
                          " bytes each, " +
                          std::to_string(accumulator_address > operand_address ? accumulator_address - operand_address
                                                                               : operand_address - accumulator_address) +
                          " bytes apart)");
  }
  reduce_unchecked(type, op, accumulator, operand, count);
}

void reduce_unchecked(DataType type, ReduceOp op, void* accumulator, const void* operand, size_t count) {
  assert(is_valid_reduction(type, op) && (count == 0 || (accumulator && operand)));
  if (count == 0) return;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return reduce_with(type, accumulator, operand, count, SumOp{});
    case ReduceOp::prod: return reduce_with(type, accumulator, operand, count, ProdOp{});
    case ReduceOp::min: return reduce_with(type, accumulator, operand, count, MinOp{});
    case ReduceOp::max: return reduce_with(type, accumulator, operand, count, MaxOp{});
    case ReduceOp::band: return reduce_with(type, accumulator, operand, count, BitAndOp{});
    case ReduceOp::bor: return reduce_with(type, accumulator, operand, count, BitOrOp{});
    case ReduceOp::bxor: return reduce_with(type, accumulator, operand, count, BitXorOp{});
  }
  throw InvalidArgument("reduce_into: invalid reduce op " + std::to_string(static_cast<int>(op)));
}

void reduce_pair_unchecked(DataType type, ReduceOp op, void* output, const void* first, const void* second,
                           size_t count) {
  assert(is_valid_reduction(type, op) && (count == 0 || (output && first && second)) && output != second);
  if (count == 0) return;
  if (output != first) {
    bool done = false;
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: done = reduce_pair_with(type, output, first, second, count, SumOp{}); break;
      case ReduceOp::prod: done = reduce_pair_with(type, output, first, second, count, ProdOp{}); break;
      case ReduceOp::min: done = reduce_pair_with(type, output, first, second, count, MinOp{}); break;
      case ReduceOp::max: done = reduce_pair_with(type, output, first, second, count, MaxOp{}); break;
      case ReduceOp::band: done = reduce_pair_with(type, output, first, second, count, BitAndOp{}); break;
      case ReduceOp::bor: done = reduce_pair_with(type, output, first, second, count, BitOrOp{}); break;
      case ReduceOp::bxor: done = reduce_pair_with(type, output, first, second, count, BitXorOp{}); break;
    }
    if (done) return;
    std::memcpy(output, first, count * element_size(type));
  }
  reduce_unchecked(type, op, output, second, count);
}

void finish_average(DataType type, void* data, size_t count, size_t contributors) {
  validate_reduction(type, ReduceOp::avg);
  check_addressable("finish_average", data, count, type);
  if (contributors == 0) {
    throw InvalidArgument("finish_average: cannot average over 0 contributors");
  }
  average_unchecked(type, data, count, contributors);
}

void average_unchecked(DataType type, void* data, size_t count, size_t contributors) {
  assert(is_valid_reduction(type, ReduceOp::avg) && (count == 0 || data) && contributors > 0);
  switch (type) {
    case DataType::int8: return average_integers<int8_t>(data, count, contributors);
    case DataType::uint8: return average_integers<uint8_t>(data, count, contributors);
    case DataType::int32: return average_integers<int32_t>(data, count, contributors);
    case DataType::uint32: return average_integers<uint32_t>(data, count, contributors);
    case DataType::int64: return average_integers<int64_t>(data, count, contributors);
    case DataType::uint64: return average_integers<uint64_t>(data, count, contributors);
    case DataType::float16: return average_16bit<Float16Format>(data, count, contributors);
    case DataType::bfloat16: return average_16bit<BFloat16Format>(data, count, contributors);
    case DataType::float32: return average_floats<float>(data, count, contributors);
    case DataType::float64: return average_floats<double>(data, count, contributors);
  }
  throw InvalidArgument("finish_average: invalid data type " + std::to_string(static_cast<int>(type)));
}

}  // namespace chorus
