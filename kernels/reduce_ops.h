/// @file reduce_ops.h
/// Element-wise reduction functors shared by the CPU loops (kernels/cpu) and the CUDA kernels (kernels/cuda), so
/// the unit tests on the CPU check exactly the arithmetic the GPU runs.
///
/// Semantics, for every element type T hoccl supports:
/// - Integers wrap modulo 2^bits on overflow (the arithmetic is done in the unsigned type, so it is defined).
/// - float and double use their own IEEE arithmetic; fp16, bf16 and fp8 are decoded to float, combined, and
///   rounded back once per binary operation (round to nearest even; fp8 saturates, see types.h).
/// - Max/Min on floating types behave like fmax/fmin: a NaN operand is ignored unless both are NaN. They return one
///   of the operands unchanged, so no rounding happens.
#pragma once

#include <type_traits>

#include "kernels/types.h"

namespace hoccl {

/// The type a storage type is computed in: float for float and the low-precision types, double for double, the
/// type itself for integers.
template <typename T>
using ComputeT = std::conditional_t<IsLowPrecision<T>::value, float, T>;

namespace detail {

/// Decodes a storage value into its compute type.
template <typename T>
HOCCL_HD ComputeT<T> load(T v) {
  if constexpr (IsLowPrecision<T>::value) {
    return toFloat(v);
  } else {
    return v;
  }
}
/// Encodes a compute-type value into storage (rounding once for the low-precision types).
template <typename T>
HOCCL_HD T store(ComputeT<T> v) {
  if constexpr (IsLowPrecision<T>::value) {
    return fromFloat<T>(v);
  } else {
    return v;
  }
}
/// fmax-like choice on values that may be NaN: true when `a` should be returned as the larger.
template <typename C>
HOCCL_HD bool pickFirstForMax(C a, C b) {
  return a > b || b != b;
}
/// fmin-like choice: true when `a` should be returned as the smaller.
template <typename C>
HOCCL_HD bool pickFirstForMin(C a, C b) {
  return a < b || b != b;
}

}  // namespace detail

/// a + b (wrapping for integers).
template <typename T>
struct FuncSum {
  /// Combines two elements.
  HOCCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      using U = std::make_unsigned_t<T>;
      return T(U(a) + U(b));
    } else {
      return detail::store<T>(detail::load(a) + detail::load(b));
    }
  }
};

/// a * b (wrapping for integers).
template <typename T>
struct FuncProd {
  /// Combines two elements.
  HOCCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      using U = std::make_unsigned_t<T>;
      // Promote to at least unsigned int so that small types never multiply as signed int.
      using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
      return T(W(U(a)) * W(U(b)));
    } else {
      return detail::store<T>(detail::load(a) * detail::load(b));
    }
  }
};

/// max(a, b); for floating types a NaN operand is ignored unless both are NaN.
template <typename T>
struct FuncMax {
  /// Combines two elements.
  HOCCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      return a > b ? a : b;
    } else {
      return detail::pickFirstForMax(detail::load(a), detail::load(b)) ? a : b;
    }
  }
};

/// min(a, b); for floating types a NaN operand is ignored unless both are NaN.
template <typename T>
struct FuncMin {
  /// Combines two elements.
  HOCCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      return a < b ? a : b;
    } else {
      return detail::pickFirstForMin(detail::load(a), detail::load(b)) ? a : b;
    }
  }
};

/// x / divisor, the post-division of Avg. Integers use C division (truncation toward zero, as NCCL's avg does);
/// floating types multiply by 1/divisor computed once in the compute type. The divisor must be >= 1.
template <typename T>
struct FuncDivide {
  /// The reciprocal (floating types) or the divisor (integers), in the compute type.
  ComputeT<T> factor;

  /// Prepares the functor for one divisor.
  HOCCL_HD explicit FuncDivide(int divisor)
      : factor(std::is_integral<T>::value ? ComputeT<T>(divisor) : ComputeT<T>(1) / ComputeT<T>(divisor)) {}

  /// Divides one element.
  HOCCL_HD T operator()(T x) const {
    if constexpr (std::is_integral<T>::value) {
      return T(x / factor);
    } else {
      return detail::store<T>(detail::load(x) * factor);
    }
  }
};

}  // namespace hoccl
