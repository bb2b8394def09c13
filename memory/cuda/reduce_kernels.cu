// Device reduction kernels for every (DataType, ReduceOp) the host kernels
// support. The element operations and the 16-bit float conversions are the
// host's own (base/reduce_ops.h, base/half.h, compiled here for the device
// too), so a device reduction gives the host's bits: 16-bit floats are
// widened to float, combined and rounded back per element, as on the host.
//
// Memory bound: each thread moves 16-byte packs (one 128-bit load per
// operand) over a grid-stride loop sized to keep every SM busy; buffers
// that are not 16-byte aligned (a block at an odd offset) take the
// element-wise kernel.
#include <cstdint>
#include <type_traits>

#include "memory/cuda/reduce_kernels.h"
#include "base/half.h"
#include "base/reduce_ops.h"
#include "base/types.h"

namespace chorus::cuda {
namespace {

using namespace reduce_ops;

constexpr int kThreads = 256;
constexpr size_t kPackBytes = 16;
// Blocks per launch: enough to fill any current GPU (132 SMs x 16 blocks);
// the grid-stride loop covers the rest.
constexpr size_t kMaxBlocks = 2048;

struct Float16Format {
  CHORUS_HOST_DEVICE static float to_float(uint16_t bits) { return half_bits_to_float(bits); }
  CHORUS_HOST_DEVICE static uint16_t from_float(float value) { return float_to_half_bits(value); }
};

struct BFloat16Format {
  CHORUS_HOST_DEVICE static float to_float(uint16_t bits) { return bfloat16_bits_to_float(bits); }
  CHORUS_HOST_DEVICE static uint16_t from_float(float value) { return float_to_bfloat16_bits(value); }
};

// One element: native types combine as they are, 16-bit floats through float.
template <class T, class Op>
struct NativeElement {
  using Storage = T;
  __device__ T operator()(T a, T b) const { return Op{}(a, b); }
};

template <class Format, class Op>
struct Widened16Element {
  using Storage = uint16_t;
  __device__ uint16_t operator()(uint16_t a, uint16_t b) const {
    return Format::from_float(Op{}(Format::to_float(a), Format::to_float(b)));
  }
};

template <class T>
struct alignas(kPackBytes) Pack {
  static constexpr size_t elements = kPackBytes / sizeof(T);
  T value[elements];
};

template <class Element>
__global__ void combine_packs(typename Element::Storage* accumulator, const typename Element::Storage* operand,
                              size_t packs) {
  using T = typename Element::Storage;
  auto* a = reinterpret_cast<Pack<T>*>(accumulator);
  const auto* b = reinterpret_cast<const Pack<T>*>(operand);
  const Element combine;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < packs;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    Pack<T> x = a[i];
    const Pack<T> y = b[i];
#pragma unroll
    for (size_t k = 0; k < Pack<T>::elements; ++k) x.value[k] = combine(x.value[k], y.value[k]);
    a[i] = x;
  }
}

template <class Element>
__global__ void combine_elements(typename Element::Storage* accumulator, const typename Element::Storage* operand,
                                 size_t count) {
  const Element combine;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    accumulator[i] = combine(accumulator[i], operand[i]);
}

unsigned blocks_for(size_t work) {
  const size_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

bool aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % kPackBytes == 0; }

template <class Element>
cudaError_t combine(void* accumulator_bytes, const void* operand_bytes, size_t count, cudaStream_t stream) {
  using T = typename Element::Storage;
  auto* accumulator = static_cast<T*>(accumulator_bytes);
  const auto* operand = static_cast<const T*>(operand_bytes);
  size_t done = 0;
  if (aligned(accumulator) && aligned(operand)) {
    const size_t packs = count / Pack<T>::elements;
    if (packs > 0) combine_packs<Element><<<blocks_for(packs), kThreads, 0, stream>>>(accumulator, operand, packs);
    done = packs * Pack<T>::elements;
  }
  if (done < count)
    combine_elements<Element><<<blocks_for(count - done), kThreads, 0, stream>>>(accumulator + done, operand + done,
                                                                                  count - done);
  return cudaGetLastError();
}

template <class Op>
cudaError_t reduce_with(DataType type, void* accumulator, const void* operand, size_t count, cudaStream_t stream) {
  switch (type) {
    case DataType::int8: return combine<NativeElement<int8_t, Op>>(accumulator, operand, count, stream);
    case DataType::uint8: return combine<NativeElement<uint8_t, Op>>(accumulator, operand, count, stream);
    case DataType::int32: return combine<NativeElement<int32_t, Op>>(accumulator, operand, count, stream);
    case DataType::uint32: return combine<NativeElement<uint32_t, Op>>(accumulator, operand, count, stream);
    case DataType::int64: return combine<NativeElement<int64_t, Op>>(accumulator, operand, count, stream);
    case DataType::uint64: return combine<NativeElement<uint64_t, Op>>(accumulator, operand, count, stream);
    default: break;
  }
  if constexpr (Op::for_floating_point) {
    switch (type) {
      case DataType::float16: return combine<Widened16Element<Float16Format, Op>>(accumulator, operand, count, stream);
      case DataType::bfloat16:
        return combine<Widened16Element<BFloat16Format, Op>>(accumulator, operand, count, stream);
      case DataType::float32: return combine<NativeElement<float, Op>>(accumulator, operand, count, stream);
      case DataType::float64: return combine<NativeElement<double, Op>>(accumulator, operand, count, stream);
      default: break;
    }
  }
  return cudaErrorInvalidValue;
}

template <class T>
__global__ void divide_integers(T* data, size_t count, size_t contributors) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    data[i] = divide_integer(data[i], contributors);
}

template <class T>
__global__ void divide_floats(T* data, size_t count, T divisor) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    data[i] = data[i] / divisor;
}

template <class Format>
__global__ void divide_16bit(uint16_t* data, size_t count, float divisor) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    data[i] = Format::from_float(Format::to_float(data[i]) / divisor);
}

template <class T>
cudaError_t average_integers(void* data, size_t count, size_t contributors, cudaStream_t stream) {
  divide_integers<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<T*>(data), count, contributors);
  return cudaGetLastError();
}

template <class T>
cudaError_t average_floats(void* data, size_t count, size_t contributors, cudaStream_t stream) {
  divide_floats<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<T*>(data), count,
                                                               static_cast<T>(contributors));
  return cudaGetLastError();
}

template <class Format>
cudaError_t average_16bit(void* data, size_t count, size_t contributors, cudaStream_t stream) {
  divide_16bit<Format><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<uint16_t*>(data), count,
                                                                   static_cast<float>(contributors));
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_reduce(int type_value, int op_value, void* accumulator, const void* operand, size_t count,
                          cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const auto type = static_cast<DataType>(type_value);
  switch (static_cast<ReduceOp>(op_value)) {
    case ReduceOp::sum:
    case ReduceOp::avg: return reduce_with<SumOp>(type, accumulator, operand, count, stream);
    case ReduceOp::prod: return reduce_with<ProdOp>(type, accumulator, operand, count, stream);
    case ReduceOp::min: return reduce_with<MinOp>(type, accumulator, operand, count, stream);
    case ReduceOp::max: return reduce_with<MaxOp>(type, accumulator, operand, count, stream);
    case ReduceOp::band: return reduce_with<BitAndOp>(type, accumulator, operand, count, stream);
    case ReduceOp::bor: return reduce_with<BitOrOp>(type, accumulator, operand, count, stream);
    case ReduceOp::bxor: return reduce_with<BitXorOp>(type, accumulator, operand, count, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_average(int type_value, void* data, size_t count, size_t contributors, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (contributors == 0) return cudaErrorInvalidValue;
  switch (static_cast<DataType>(type_value)) {
    case DataType::int8: return average_integers<int8_t>(data, count, contributors, stream);
    case DataType::uint8: return average_integers<uint8_t>(data, count, contributors, stream);
    case DataType::int32: return average_integers<int32_t>(data, count, contributors, stream);
    case DataType::uint32: return average_integers<uint32_t>(data, count, contributors, stream);
    case DataType::int64: return average_integers<int64_t>(data, count, contributors, stream);
    case DataType::uint64: return average_integers<uint64_t>(data, count, contributors, stream);
    case DataType::float16: return average_16bit<Float16Format>(data, count, contributors, stream);
    case DataType::bfloat16: return average_16bit<BFloat16Format>(data, count, contributors, stream);
    case DataType::float32: return average_floats<float>(data, count, contributors, stream);
    case DataType::float64: return average_floats<double>(data, count, contributors, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace chorus::cuda
