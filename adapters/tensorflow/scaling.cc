#include "adapters/tensorflow/scaling.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "base/half.h"

namespace chorus::tensorflow_ops {
namespace {

// The float64 product as an integer of type T: truncated toward zero, and
// where it does not fit, the nearest value that does (C++ leaves that case
// undefined; a NaN factor gives 0).
template <class T>
T to_integer(double value) {
  if (std::isnan(value)) return 0;
  const double truncated = std::trunc(value);
  if (truncated <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (truncated >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(truncated);
}

template <class T>
void scale_integers(const void* input, void* output, size_t count, double factor) {
  const T* in = static_cast<const T*>(input);
  T* out = static_cast<T*>(output);
  for (size_t i = 0; i < count; ++i) out[i] = to_integer<T>(factor * static_cast<double>(in[i]));
}

template <class T, class Compute>
void scale_floats(const void* input, void* output, size_t count, Compute factor) {
  const T* in = static_cast<const T*>(input);
  T* out = static_cast<T*>(output);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<T>(factor * static_cast<Compute>(in[i]));
}

}  // namespace

void scale(DataType type, const void* input, void* output, size_t count, double factor) {
  switch (type) {
    case DataType::int8: return scale_integers<int8_t>(input, output, count, factor);
    case DataType::uint8: return scale_integers<uint8_t>(input, output, count, factor);
    case DataType::int32: return scale_integers<int32_t>(input, output, count, factor);
    case DataType::uint32: return scale_integers<uint32_t>(input, output, count, factor);
    case DataType::int64: return scale_integers<int64_t>(input, output, count, factor);
    case DataType::uint64: return scale_integers<uint64_t>(input, output, count, factor);
    case DataType::float32: return scale_floats<float>(input, output, count, static_cast<float>(factor));
    case DataType::float64: return scale_floats<double>(input, output, count, factor);
    case DataType::float16: {
      const auto* in = static_cast<const float16_t*>(input);
      auto* out = static_cast<float16_t*>(output);
      const auto f = static_cast<float>(factor);
      for (size_t i = 0; i < count; ++i) out[i] = to_float16(f * to_float(in[i]));
      return;
    }
    case DataType::bfloat16: {
      const auto* in = static_cast<const bfloat16_t*>(input);
      auto* out = static_cast<bfloat16_t*>(output);
      const auto f = static_cast<float>(factor);
      for (size_t i = 0; i < count; ++i) out[i] = to_bfloat16(f * to_float(in[i]));
      return;
    }
  }
}

}  // namespace chorus::tensorflow_ops
