// The public CPU kernel entry points: type tables, the run-time choice between the AVX2 and baseline loops,
// and double conversions for references.
#include "kernels/cpu/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/reduce_isa.h"
#include "kernels/types.h"

namespace hoccl::kernels {
namespace {

bool validType(hocclDataType_t dt) { return dt >= hocclInt8 && dt <= hocclFloat8e5m2; }

/// Rounds a double to float with round-to-odd: truncate toward zero, then set the last bit if anything was lost.
/// A second rounding of that float to a format with at most 22 significant bits is then the correct single
/// rounding of the double (the odd bit acts as the sticky bit). Overflow gives +-FLT_MAX with the sticky bit,
/// which the narrower formats still see as overflow.
float roundToOddFloat(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u |= 1u;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Integers: round to nearest (ties away from zero), clamp to [lo, hi], NaN -> 0.
template <typename I>
I clampToInt(double v) {
  if (std::isnan(v)) return 0;
  const double r = std::round(v);
  if (r <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  // 2^64 and 2^63 are exactly representable; anything at or above the bound saturates.
  if (r >= std::ldexp(1.0, std::numeric_limits<I>::digits)) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

template <typename T>
void storeAs(T value, void* elem) {
  std::memcpy(elem, &value, sizeof value);
}
template <typename T>
T loadAs(const void* elem) {
  T value;
  std::memcpy(&value, elem, sizeof value);
  return value;
}

}  // namespace

size_t typeSize(hocclDataType_t dt) {
  switch (dt) {
    case hocclInt8:
    case hocclUint8:
    case hocclFloat8e4m3:
    case hocclFloat8e5m2: return 1;
    case hocclFloat16:
    case hocclBfloat16: return 2;
    case hocclInt32:
    case hocclUint32:
    case hocclFloat32: return 4;
    case hocclInt64:
    case hocclUint64:
    case hocclFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(hocclDataType_t dt) {
  static const char* const kNames[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                       "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return validType(dt) ? kNames[dt] : "invalid";
}

bool isFloatType(hocclDataType_t dt) {
  return dt == hocclFloat16 || dt == hocclFloat32 || dt == hocclFloat64 || dt == hocclBfloat16 ||
         dt == hocclFloat8e4m3 || dt == hocclFloat8e5m2;
}

const char* opName(BinOp op) {
  switch (op) {
    case BinOp::Sum: return "sum";
    case BinOp::Prod: return "prod";
    case BinOp::Max: return "max";
    case BinOp::Min: return "min";
  }
  return "invalid";
}

const char* isaName() { return avx2Usable() ? "avx2" : "baseline"; }

void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op) {
  if (!validType(dt) || n == 0) return;
  if (avx2Usable()) {
    avx2::reduce(dst, a, b, n, dt, op);
  } else {
    baseline::reduce(dst, a, b, n, dt, op);
  }
}

void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar) {
  if (!validType(dt) || n == 0) return;
  if (avx2Usable()) {
    avx2::scale(dst, src, n, dt, scalar);
  } else {
    baseline::scale(dst, src, n, dt, scalar);
  }
}

void divide(void* data, size_t n, hocclDataType_t dt, int divisor) {
  if (!validType(dt) || n == 0 || divisor < 1) return;
  if (avx2Usable()) {
    avx2::divide(data, n, dt, divisor);
  } else {
    baseline::divide(data, n, dt, divisor);
  }
}

double toDouble(const void* elem, hocclDataType_t dt) {
  switch (dt) {
    case hocclInt8: return loadAs<int8_t>(elem);
    case hocclUint8: return loadAs<uint8_t>(elem);
    case hocclInt32: return loadAs<int32_t>(elem);
    case hocclUint32: return loadAs<uint32_t>(elem);
    case hocclInt64: return static_cast<double>(loadAs<int64_t>(elem));
    case hocclUint64: return static_cast<double>(loadAs<uint64_t>(elem));
    case hocclFloat16: return toFloat(loadAs<half_t>(elem));
    case hocclFloat32: return loadAs<float>(elem);
    case hocclFloat64: return loadAs<double>(elem);
    case hocclBfloat16: return toFloat(loadAs<bf16_t>(elem));
    case hocclFloat8e4m3: return toFloat(loadAs<fp8e4m3_t>(elem));
    case hocclFloat8e5m2: return toFloat(loadAs<fp8e5m2_t>(elem));
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void fromDouble(double v, void* elem, hocclDataType_t dt) {
  switch (dt) {
    case hocclInt8: storeAs(clampToInt<int8_t>(v), elem); break;
    case hocclUint8: storeAs(clampToInt<uint8_t>(v), elem); break;
    case hocclInt32: storeAs(clampToInt<int32_t>(v), elem); break;
    case hocclUint32: storeAs(clampToInt<uint32_t>(v), elem); break;
    case hocclInt64: storeAs(clampToInt<int64_t>(v), elem); break;
    case hocclUint64: storeAs(clampToInt<uint64_t>(v), elem); break;
    case hocclFloat16: storeAs(fromFloat<half_t>(roundToOddFloat(v)), elem); break;
    case hocclFloat32: storeAs(static_cast<float>(v), elem); break;
    case hocclFloat64: storeAs(v, elem); break;
    case hocclBfloat16: storeAs(fromFloat<bf16_t>(roundToOddFloat(v)), elem); break;
    case hocclFloat8e4m3: storeAs(fromFloat<fp8e4m3_t>(roundToOddFloat(v)), elem); break;
    case hocclFloat8e5m2: storeAs(fromFloat<fp8e5m2_t>(roundToOddFloat(v)), elem); break;
    default: break;
  }
}

}  // namespace hoccl::kernels
