/// @file types.h
/// Storage types for the low-precision floats hoccl reduces (fp16, bf16, fp8 e4m3/e5m2) and their conversions to
/// and from float. Usable from host code and, when compiled by nvcc, from device code (HOCCL_HD).
///
/// Conversion rules (checked against NVIDIA's cuda_fp16/cuda_bf16/cuda_fp8 headers):
/// - float -> any of these rounds to nearest, ties to even, including in the subnormal range.
/// - fp16 and bf16 overflow to +-inf; NaN becomes the canonical NaN 0x7FFF.
/// - fp8 follows the __NV_SATFINITE conversion: values beyond the largest finite value, and +-inf, saturate to
///   +-448 (e4m3, which has no inf) or +-57344 (e5m2); NaN becomes 0x7F (e4m3) or a quiet NaN 0x7E|0x7F (e5m2),
///   with the input's sign. Decoding e5m2 0x7C gives inf (e5m2 has inf; the saturating conversion never makes it).
///
/// The code is branch-light on purpose: the CPU reduction loops inline these functions and the compiler vectorises
/// them.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
/// Marks a function usable from host and device code.
#define HOCCL_HD __host__ __device__ __forceinline__
#elif defined(__GNUC__)
/// Marks a function usable from host and device code (always inlined on the host, so that loops vectorise).
#define HOCCL_HD inline __attribute__((always_inline))
#else
/// Marks a function usable from host and device code.
#define HOCCL_HD inline
#endif

namespace hoccl {

/// IEEE binary16 storage (1 sign, 5 exponent, 10 mantissa bits).
struct half_t {
  uint16_t bits;
};
/// bfloat16 storage (1 sign, 8 exponent, 7 mantissa bits): the top half of a float.
struct bf16_t {
  uint16_t bits;
};
/// OCP fp8 E4M3 storage (bias 7, max 448, no inf, NaN = S.1111.111).
struct fp8e4m3_t {
  uint8_t bits;
};
/// OCP fp8 E5M2 storage (bias 15, max 57344, inf = S.11111.00, NaN = S.11111.{01,10,11}).
struct fp8e5m2_t {
  uint8_t bits;
};

namespace detail {

/// The bits of a float.
HOCCL_HD uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
/// The float with these bits.
HOCCL_HD float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/// Rounds a non-negative finite float (bits u, below the format's overflow point and at least its smallest
/// normal) to a format with `mant` mantissa bits, returning the format's bits without sign. `expShift` is
/// (127 - bias) << mant: the difference of the exponent fields, positioned. Ties to even: adding half an ulp less
/// one, plus the kept part's lowest bit, carries exactly when rounding up is due; a carry out of the mantissa
/// correctly moves to the next binade.
HOCCL_HD uint32_t roundNormal(uint32_t u, unsigned mant, uint32_t expShift) {
  const unsigned drop = 23u - mant;
  return ((u + ((1u << (drop - 1u)) - 1u) + ((u >> drop) & 1u)) >> drop) - expShift;
}

/// Rounds a non-negative float below the format's smallest normal to a multiple of the smallest subnormal 2^-s,
/// using the FPU's round-to-nearest-even: adding 2^(23-s) leaves exactly the subnormal's bits in the low mantissa.
/// `magicBits` is the float bit pattern of 2^(23-s). The result may be the smallest normal (a correct encoding).
HOCCL_HD uint32_t roundSubnormal(float absx, uint32_t magicBits) {
  return floatBits(absx + bitsFloat(magicBits)) - magicBits;
}

}  // namespace detail

// The conversions below compute every candidate result unconditionally and then select, so that a loop calling
// them has no control flow and vectorises.

/// Decodes an fp16 value (exact).
HOCCL_HD float toFloat(half_t h) {
  const uint32_t sign = (uint32_t(h.bits) & 0x8000u) << 16;
  const uint32_t em = h.bits & 0x7FFFu;
  const uint32_t normal = (em << 13) + ((127u - 15u) << 23);                         // rebias the exponent
  const uint32_t special = 0x7F800000u | ((em & 0x3FFu) << 13);                      // inf or NaN (payload kept)
  const uint32_t subnormal = detail::floatBits(float(em) * 5.9604644775390625e-8f);  // em * 2^-24, exact
  const uint32_t u = em >= 0x7C00u ? special : (em >= 0x0400u ? normal : subnormal);
  return detail::bitsFloat(sign | u);
}

/// Decodes a bf16 value (exact).
HOCCL_HD float toFloat(bf16_t b) { return detail::bitsFloat(uint32_t(b.bits) << 16); }

/// Decodes an fp8 e4m3 value (exact).
HOCCL_HD float toFloat(fp8e4m3_t v) {
  const uint32_t sign = (uint32_t(v.bits) & 0x80u) << 24;
  const uint32_t em = v.bits & 0x7Fu;
  const uint32_t normal = (em << 20) + ((127u - 7u) << 23);
  const uint32_t subnormal = detail::floatBits(float(em) * 0.001953125f);             // em * 2^-9
  const uint32_t u = em == 0x7Fu ? 0x7FC00000u : (em >= 0x08u ? normal : subnormal);  // 0x7F: the only NaN
  return detail::bitsFloat(sign | u);
}

/// Decodes an fp8 e5m2 value (exact): e5m2 is the upper byte of an fp16.
HOCCL_HD float toFloat(fp8e5m2_t v) { return toFloat(half_t{uint16_t(uint16_t(v.bits) << 8)}); }

/// Identity overloads, so generic code can call toFloat on any floating type.
HOCCL_HD float toFloat(float f) { return f; }

/// Encodes a float as T with the rounding rules in this file's header. Specialised for the four storage types.
template <typename T>
HOCCL_HD T fromFloat(float f);

/// float -> fp16: round to nearest even, overflow to inf, NaN -> 0x7FFF.
template <>
HOCCL_HD half_t fromFloat<half_t>(float f) {
  const uint32_t x = detail::floatBits(f);
  const uint32_t u = x & 0x7FFFFFFFu;
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t normal = detail::roundNormal(u, 10u, (127u - 15u) << 10);
  const uint32_t subnormal = detail::roundSubnormal(detail::bitsFloat(u), 0x3F000000u);  // 2^-1: ulp 2^-24
  uint32_t r = u >= 0x38800000u ? normal : subnormal;                                    // 2^-14: smallest normal
  r = u >= 0x477FF000u ? 0x7C00u : r;  // >= 65520 (max + half ulp), inf
  return half_t{uint16_t(u > 0x7F800000u ? 0x7FFFu : (sign | r))};
}

/// float -> bf16: round to nearest even, overflow to inf, NaN -> 0x7FFF.
template <>
HOCCL_HD bf16_t fromFloat<bf16_t>(float f) {
  const uint32_t x = detail::floatBits(f);
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  return bf16_t{uint16_t((x & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FFFu : rounded)};
}

/// float -> fp8 e4m3 with saturation to +-448 (also for +-inf); NaN -> 0x7F with sign.
template <>
HOCCL_HD fp8e4m3_t fromFloat<fp8e4m3_t>(float f) {
  const uint32_t x = detail::floatBits(f);
  const uint32_t u = x & 0x7FFFFFFFu;
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t normal = detail::roundNormal(u, 3u, (127u - 7u) << 3);
  const uint32_t subnormal = detail::roundSubnormal(detail::bitsFloat(u), 0x46800000u);  // 2^14: ulp 2^-9
  uint32_t r = u >= 0x3C800000u ? normal : subnormal;                                    // 2^-6: smallest normal
  r = u > 0x43E80000u ? 0x7Eu : r;                                                       // > 464 = 448 + half ulp, inf
  r = u > 0x7F800000u ? 0x7Fu : r;                                                       // NaN
  return fp8e4m3_t{uint8_t(sign | r)};
}

/// float -> fp8 e5m2 with saturation to +-57344 (also for +-inf); NaN -> quiet NaN with sign.
template <>
HOCCL_HD fp8e5m2_t fromFloat<fp8e5m2_t>(float f) {
  const uint32_t x = detail::floatBits(f);
  const uint32_t u = x & 0x7FFFFFFFu;
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t normal = detail::roundNormal(u, 2u, (127u - 15u) << 2);
  const uint32_t subnormal = detail::roundSubnormal(detail::bitsFloat(u), 0x43000000u);  // 2^7: ulp 2^-16
  uint32_t r = u >= 0x38800000u ? normal : subnormal;                                    // 2^-14: smallest normal
  r = u >= 0x47700000u ? 0x7Bu : r;                        // >= 61440 = 57344 + half ulp, inf
  r = u > 0x7F800000u ? (0x7Eu | ((u >> 21) & 0x3u)) : r;  // NaN: quiet, top mantissa bits kept
  return fp8e5m2_t{uint8_t(sign | r)};
}

/// Identity, for generic code.
template <>
HOCCL_HD float fromFloat<float>(float f) {
  return f;
}

/// True for the storage types that are computed in float (fp16, bf16, fp8).
template <typename T>
struct IsLowPrecision {
  static constexpr bool value = false;
};
template <>
struct IsLowPrecision<half_t> {
  static constexpr bool value = true;
};
template <>
struct IsLowPrecision<bf16_t> {
  static constexpr bool value = true;
};
template <>
struct IsLowPrecision<fp8e4m3_t> {
  static constexpr bool value = true;
};
template <>
struct IsLowPrecision<fp8e5m2_t> {
  static constexpr bool value = true;
};

}  // namespace hoccl
