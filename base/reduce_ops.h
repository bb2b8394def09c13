// The element operations of every reduction, shared by the host kernels
// (base/reduce.cc) and the CUDA kernels (memory/cuda/reduce_kernels.cu): one
// definition is what makes a device reduction bit-identical to the host's.
// Internal to the library (not installed).
#pragma once

#include <cstddef>
#include <type_traits>

#include "base/host_device.h"

namespace chorus::reduce_ops {

// Integer arithmetic happens in the unsigned type (at least unsigned int, so
// narrow types are not promoted to signed int): overflow wraps modulo 2^bits
// instead of being undefined, and C++20 defines the conversion back.
template <class T>
using Wrapping = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct SumOp {
  static constexpr bool for_floating_point = true;
  template <class T>
  CHORUS_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Wrapping<T>>(a) + static_cast<Wrapping<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  static constexpr bool for_floating_point = true;
  template <class T>
  CHORUS_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Wrapping<T>>(a) * static_cast<Wrapping<T>>(b));
    } else {
      return a * b;
    }
  }
};

// Floating point min/max propagate NaN from either side, so every rank gets
// the same answer whatever order the partial results arrive in.
struct MinOp {
  static constexpr bool for_floating_point = true;
  template <class T>
  CHORUS_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      return ((b < a) | (b != b)) ? b : a;
    }
  }
};

struct MaxOp {
  static constexpr bool for_floating_point = true;
  template <class T>
  CHORUS_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      return ((a < b) | (b != b)) ? b : a;
    }
  }
};

struct BitAndOp {
  static constexpr bool for_floating_point = false;
  template <class T>
  CHORUS_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a & b); }
};

struct BitOrOp {
  static constexpr bool for_floating_point = false;
  template <class T>
  CHORUS_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a | b); }
};

struct BitXorOp {
  static constexpr bool for_floating_point = false;
  template <class T>
  CHORUS_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};

// Integer average truncates toward zero. Done on the magnitude in the
// unsigned type so INT_MIN and any contributor count (even beyond the
// type's range) divide without overflow.
template <class T>
CHORUS_HOST_DEVICE T divide_integer(T value, size_t contributors) {
  using Magnitude = std::make_unsigned_t<T>;
  if constexpr (std::is_signed_v<T>) {
    const bool negative = value < 0;
    const Magnitude magnitude =
        negative ? static_cast<Magnitude>(Magnitude{0} - static_cast<Magnitude>(value)) : static_cast<Magnitude>(value);
    const Magnitude quotient = static_cast<Magnitude>(magnitude / contributors);
    return negative ? static_cast<T>(Magnitude{0} - quotient) : static_cast<T>(quotient);
  } else {
    return static_cast<T>(value / contributors);
  }
}

}  // namespace chorus::reduce_ops
