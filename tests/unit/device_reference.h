/// @file device_reference.h
/// The double-precision reference of the device kernel tests (test_device_kernels, test_device_ops): the four
/// binary operations, and inputs that every type holds exactly.
#pragma once

#include <cstddef>

#include "hoccl/hoccl.h"
#include "kernels/cpu/reduce.h"

namespace hoccl::testref {

/// op(a, b) in double precision.
inline double refOp(double a, double b, kernels::BinOp op) {
  switch (op) {
    case kernels::BinOp::Sum: return a + b;
    case kernels::BinOp::Prod: return a * b;
    case kernels::BinOp::Max: return a > b ? a : b;
    case kernels::BinOp::Min: return a < b ? a : b;
  }
  return 0;
}

/// Element i of input `salt`: a value every type holds exactly (fp8 e4m3 included), whose sums and products of two
/// such values are exact too (small integers, scaled by 1/4 for the wider floats and 1/2 for fp8; unsigned types
/// non-negative).
inline double valueAt(size_t i, int salt, hocclDataType_t dt) {
  const bool isUnsigned = dt == hocclUint8 || dt == hocclUint32 || dt == hocclUint64;
  const double v = double(int((i * 7 + salt * 3) % 9) - (isUnsigned ? 0 : 4));
  const bool isFloat = dt == hocclFloat16 || dt == hocclFloat32 || dt == hocclFloat64 || dt == hocclBfloat16;
  return dt == hocclFloat8e4m3 || dt == hocclFloat8e5m2 ? v * 0.5 : isFloat ? v * 0.25 : v;
}

}  // namespace hoccl::testref
