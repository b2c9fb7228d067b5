// Unit tests for kernels/: the low-precision conversions against independent oracles (brute-force nearest value,
// the CPU's F16C converter, field-by-field decoders written with ldexp), and every type x operation of the CPU
// reduction loops (dispatcher, baseline and AVX2 builds, distinct and in-place buffers) against a double-precision
// or wrapping-integer reference on random data.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/reduce_isa.h"
#include "kernels/reduce_ops.h"
#include "kernels/types.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using hoccl::bf16_t;
using hoccl::fp8e4m3_t;
using hoccl::fp8e5m2_t;
using hoccl::half_t;
namespace k = hoccl::kernels;

namespace {

const hocclDataType_t kAllTypes[] = {hocclInt8,    hocclUint8,    hocclInt32,      hocclUint32,
                                     hocclInt64,   hocclUint64,   hocclFloat16,    hocclFloat32,
                                     hocclFloat64, hocclBfloat16, hocclFloat8e4m3, hocclFloat8e5m2};
const k::BinOp kAllOps[] = {k::BinOp::Sum, k::BinOp::Prod, k::BinOp::Max, k::BinOp::Min};

// ---------------------------------------------------------------------------------------------------------------
// Independent decoders: sign, exponent and mantissa fields combined with ldexp, in double.

/// Decodes a binary float format with `eb` exponent bits and `mb` mantissa bits. `ieeeSpecials`: the all-ones
/// exponent means inf/NaN (fp16, bf16, e5m2); otherwise only all-ones exponent and mantissa is NaN (e4m3).
double decodeFields(uint32_t bits, int eb, int mb, bool ieeeSpecials) {
  const int bias = (1 << (eb - 1)) - 1;
  const uint32_t sign = (bits >> (eb + mb)) & 1u;
  const uint32_t e = (bits >> mb) & ((1u << eb) - 1u);
  const uint32_t m = bits & ((1u << mb) - 1u);
  double v;
  if (e == (1u << eb) - 1u && (ieeeSpecials || m == (1u << mb) - 1u)) {
    v = (ieeeSpecials && m == 0) ? std::numeric_limits<double>::infinity() : std::nan("");
  } else if (e == 0) {
    v = std::ldexp(double(m), 1 - bias - mb);
  } else {
    v = std::ldexp(double(m + (1u << mb)), int(e) - bias - mb);
  }
  return sign ? -v : v;
}
double refDecodeHalf(uint16_t b) { return decodeFields(b, 5, 10, true); }
double refDecodeBf16(uint16_t b) { return decodeFields(b, 8, 7, true); }
double refDecodeE4M3(uint8_t b) { return decodeFields(b, 4, 3, false); }
double refDecodeE5M2(uint8_t b) { return decodeFields(b, 5, 2, true); }

/// Brute-force fp8 encoder: the nearest finite code, ties to the even code, saturating at the largest finite value
/// (NVIDIA's __NV_SATFINITE rule), NaN -> any NaN (checked separately).
uint8_t bruteFp8(double x, double (*decode)(uint8_t)) {
  if (std::isnan(x)) return 0x7F;
  // Beyond the largest finite value every code is equally far in double arithmetic: saturate explicitly.
  double maxFinite = 0;
  for (int c = 0; c < 128; ++c) {
    const double v = decode(uint8_t(c));
    if (std::isfinite(v) && v > maxFinite) maxFinite = v;
  }
  if (std::fabs(x) >= maxFinite) {
    for (int c = 0; c < 128; ++c) {
      if (decode(uint8_t(c)) == maxFinite) return uint8_t(std::signbit(x) ? (c | 0x80) : c);
    }
  }
  int best = -1;
  double bestErr = 0;
  for (int c = 0; c < 256; ++c) {
    const double v = decode(uint8_t(c));
    if (!std::isfinite(v)) continue;
    if (std::signbit(v) != std::signbit(x) && v != 0) continue;
    const double err = std::fabs(v - x);
    if (best < 0 || err < bestErr || (err == bestErr && (c & 1) == 0 && (best & 1) == 1)) {
      best = c;
      bestErr = err;
    }
  }
  // Keep the sign of zero like the hardware does (-tiny -> -0).
  if ((best & 0x7F) == 0) best = std::signbit(x) ? 0x80 : 0x00;
  return uint8_t(best);
}

/// bf16 oracle: the two candidates around x (truncation and one code up), nearest wins, ties to even.
uint16_t oracleBf16(float x) {
  if (std::isnan(x)) return 0x7FFF;
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint16_t lo = uint16_t(u >> 16);
  const uint16_t hi = uint16_t(lo + 1);
  const double dlo = refDecodeBf16(lo);
  double dhi = refDecodeBf16(hi);
  if (std::isinf(dlo)) return lo;
  // Rounding treats inf as the next binade's first value, 2^128: overflow happens from max + half an ulp.
  if (std::isinf(dhi)) dhi = std::copysign(std::ldexp(1.0, 128), dhi);
  const double elo = std::fabs(double(x) - dlo), ehi = std::fabs(dhi - double(x));
  if (elo < ehi) return lo;
  if (ehi < elo) return hi;
  return (lo & 1) ? hi : lo;
}

#if defined(__x86_64__)
/// fp16 oracle: the CPU's own converter (round to nearest even).
__attribute__((target("f16c"))) uint16_t oracleHalf(float x) {
  return uint16_t(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
bool haveF16C() { return __builtin_cpu_supports("f16c"); }
#else
uint16_t oracleHalf(float) { return 0; }
bool haveF16C() { return false; }
#endif

float randomFloatAnyBits(std::mt19937& rng) {
  uint32_t u = rng();
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t halfOf(double v) {
  half_t h;
  k::fromDouble(v, &h, hocclFloat16);
  return h.bits;
}

}  // namespace

TEST_CASE("type table: sizes, nccl-tests names, float flags, invalid types", "[kernels]") {
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  const char* names[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                         "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  for (int i = 0; i < 12; ++i) {
    const auto dt = hocclDataType_t(i);
    CHECK(k::typeSize(dt) == sizes[i]);
    CHECK(std::string(k::typeName(dt)) == names[i]);
    CHECK(k::isFloatType(dt) == (i >= 6));
  }
  CHECK(k::typeSize(hocclDataType_t(12)) == 0);
  CHECK(k::typeSize(hocclDataType_t(-1)) == 0);
  CHECK(std::string(k::typeName(hocclDataType_t(99))) == "invalid");
  CHECK_FALSE(k::isFloatType(hocclDataType_t(12)));
  CHECK(std::string(k::opName(k::BinOp::Max)) == "max");
}

TEST_CASE("decoders agree with field-by-field decoding for every code", "[kernels][convert]") {
  auto same = [](double a, double b) {
    return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
  };
  for (uint32_t c = 0; c < 65536; ++c) {
    INFO("code " << c);
    REQUIRE(same(hoccl::toFloat(half_t{uint16_t(c)}), refDecodeHalf(uint16_t(c))));
    REQUIRE(same(hoccl::toFloat(bf16_t{uint16_t(c)}), refDecodeBf16(uint16_t(c))));
  }
  for (uint32_t c = 0; c < 256; ++c) {
    INFO("code " << c);
    REQUIRE(same(hoccl::toFloat(fp8e4m3_t{uint8_t(c)}), refDecodeE4M3(uint8_t(c))));
    REQUIRE(same(hoccl::toFloat(fp8e5m2_t{uint8_t(c)}), refDecodeE5M2(uint8_t(c))));
  }
  CHECK(hoccl::toFloat(fp8e4m3_t{0x7E}) == 448.0f);
  CHECK(hoccl::toFloat(fp8e5m2_t{0x7B}) == 57344.0f);
  CHECK(std::isinf(hoccl::toFloat(fp8e5m2_t{0x7C})));
  CHECK(std::isnan(hoccl::toFloat(fp8e4m3_t{0xFF})));
  CHECK(hoccl::toFloat(half_t{0x0001}) == std::ldexp(1.0f, -24));
}

TEST_CASE("every finite code survives encode(decode(code))", "[kernels][convert]") {
  for (uint32_t c = 0; c < 65536; ++c) {
    if (!std::isnan(refDecodeHalf(uint16_t(c))))
      REQUIRE(hoccl::fromFloat<half_t>(hoccl::toFloat(half_t{uint16_t(c)})).bits == c);
    if (!std::isnan(refDecodeBf16(uint16_t(c))))
      REQUIRE(hoccl::fromFloat<bf16_t>(hoccl::toFloat(bf16_t{uint16_t(c)})).bits == c);
  }
  for (uint32_t c = 0; c < 256; ++c) {
    if (!std::isnan(refDecodeE4M3(uint8_t(c))))
      REQUIRE(hoccl::fromFloat<fp8e4m3_t>(hoccl::toFloat(fp8e4m3_t{uint8_t(c)})).bits == c);
    if (std::isfinite(refDecodeE5M2(uint8_t(c))))
      REQUIRE(hoccl::fromFloat<fp8e5m2_t>(hoccl::toFloat(fp8e5m2_t{uint8_t(c)})).bits == c);
  }
}

TEST_CASE("fp16 rounding: ties to even, subnormals, overflow, NaN", "[kernels][convert]") {
  using hoccl::fromFloat;
  CHECK(fromFloat<half_t>(1.0f + std::ldexp(1.0f, -11)).bits == 0x3C00);                   // tie, even stays
  CHECK(fromFloat<half_t>(1.0f + 3 * std::ldexp(1.0f, -11)).bits == 0x3C02);               // tie, odd rounds up
  CHECK(fromFloat<half_t>(1.0f + std::ldexp(1.5f, -11)).bits == 0x3C01);                   // above the tie
  CHECK(fromFloat<half_t>(std::ldexp(1.0f, -24)).bits == 0x0001);                          // smallest subnormal
  CHECK(fromFloat<half_t>(std::ldexp(1.0f, -25)).bits == 0x0000);                          // half of it: tie to even 0
  CHECK(fromFloat<half_t>(-std::ldexp(1.0f, -25)).bits == 0x8000);                         // keeps the sign
  CHECK(fromFloat<half_t>(std::ldexp(3.0f, -25)).bits == 0x0002);                          // 1.5 units: tie up to 2
  CHECK(fromFloat<half_t>(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)).bits == 0x0400);  // rounds to min normal
  CHECK(fromFloat<half_t>(65504.0f).bits == 0x7BFF);
  CHECK(fromFloat<half_t>(65519.0f).bits == 0x7BFF);
  CHECK(fromFloat<half_t>(65520.0f).bits == 0x7C00);  // tie at max + half ulp -> inf
  CHECK(fromFloat<half_t>(-1e30f).bits == 0xFC00);
  CHECK(fromFloat<half_t>(std::numeric_limits<float>::infinity()).bits == 0x7C00);
  CHECK(fromFloat<half_t>(std::nanf("")).bits == 0x7FFF);
  CHECK(fromFloat<half_t>(std::ldexp(1.0f, -140)).bits == 0x0000);  // float subnormal input
}

TEST_CASE("fp16 encoding matches the CPU's F16C converter on random floats", "[kernels][convert]") {
  if (!haveF16C()) {
    WARN("no F16C on this CPU: oracle test skipped");
    return;
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mag(-30.0f, 17.0f);
  for (int i = 0; i < 400000; ++i) {
    const float x = (i & 1) ? randomFloatAnyBits(rng)
                            : std::ldexp(1.0f + float(rng() % 4096) / 4096.0f, int(mag(rng))) *
                                  ((rng() & 1) ? -1.0f : 1.0f);
    const uint16_t got = hoccl::fromFloat<half_t>(x).bits;
    const uint16_t want = oracleHalf(x);
    INFO("x = " << x);
    if (std::isnan(x)) {
      REQUIRE(std::isnan(hoccl::toFloat(half_t{got})));
    } else {
      REQUIRE(got == want);
    }
  }
}

TEST_CASE("bf16 rounding: ties to even, overflow, NaN, and a nearest-value oracle", "[kernels][convert]") {
  using hoccl::fromFloat;
  CHECK(fromFloat<bf16_t>(1.0f + std::ldexp(1.0f, -8)).bits == 0x3F80);        // tie, even stays
  CHECK(fromFloat<bf16_t>(1.0f + 3 * std::ldexp(1.0f, -8)).bits == 0x3F82);    // tie, odd rounds up
  CHECK(fromFloat<bf16_t>(std::numeric_limits<float>::max()).bits == 0x7F80);  // rounds up to inf
  CHECK(fromFloat<bf16_t>(-std::numeric_limits<float>::infinity()).bits == 0xFF80);
  CHECK(fromFloat<bf16_t>(std::nanf("")).bits == 0x7FFF);
  CHECK(fromFloat<bf16_t>(std::ldexp(1.0f, -133)).bits == 0x0001);  // bf16 subnormal
  std::mt19937 rng(5);
  for (int i = 0; i < 400000; ++i) {
    const float x = randomFloatAnyBits(rng);
    INFO("x = " << x);
    const uint16_t got = fromFloat<bf16_t>(x).bits;
    if (std::isnan(x)) {
      REQUIRE(got == 0x7FFF);
    } else {
      REQUIRE(got == oracleBf16(x));
    }
  }
}

TEST_CASE("fp8 rounding: saturation (SATFINITE), ties, subnormals, NaN", "[kernels][convert]") {
  using hoccl::fromFloat;
  const float inf = std::numeric_limits<float>::infinity();
  // e4m3: max 448, no inf.
  CHECK(fromFloat<fp8e4m3_t>(448.0f).bits == 0x7E);
  CHECK(fromFloat<fp8e4m3_t>(464.0f).bits == 0x7E);
  CHECK(fromFloat<fp8e4m3_t>(1e9f).bits == 0x7E);
  CHECK(fromFloat<fp8e4m3_t>(inf).bits == 0x7E);
  CHECK(fromFloat<fp8e4m3_t>(-inf).bits == 0xFE);
  CHECK((fromFloat<fp8e4m3_t>(std::nanf("")).bits & 0x7F) == 0x7F);
  CHECK(fromFloat<fp8e4m3_t>(std::ldexp(1.0f, -9)).bits == 0x01);             // smallest subnormal
  CHECK(fromFloat<fp8e4m3_t>(std::ldexp(1.0f, -10)).bits == 0x00);            // tie -> 0
  CHECK(fromFloat<fp8e4m3_t>(std::ldexp(3.0f, -10)).bits == 0x02);            // tie -> even 2
  CHECK(fromFloat<fp8e4m3_t>(1.0f + std::ldexp(1.0f, -4)).bits == 0x38);      // tie, even stays 1.0
  CHECK(fromFloat<fp8e4m3_t>(1.0f + 3 * std::ldexp(1.0f, -4)).bits == 0x3A);  // tie, odd rounds up
  // e5m2: max 57344, has inf, but the saturating conversion never produces it.
  CHECK(fromFloat<fp8e5m2_t>(57344.0f).bits == 0x7B);
  CHECK(fromFloat<fp8e5m2_t>(61440.0f).bits == 0x7B);
  CHECK(fromFloat<fp8e5m2_t>(inf).bits == 0x7B);
  CHECK(fromFloat<fp8e5m2_t>(-inf).bits == 0xFB);
  CHECK(std::isnan(hoccl::toFloat(fromFloat<fp8e5m2_t>(std::nanf("")))));
  CHECK(fromFloat<fp8e5m2_t>(std::ldexp(1.0f, -16)).bits == 0x01);
  CHECK(fromFloat<fp8e5m2_t>(std::ldexp(1.0f, -17)).bits == 0x00);
  CHECK(fromFloat<fp8e5m2_t>(-std::ldexp(1.0f, -17)).bits == 0x80);
}

TEST_CASE("fp8 encoding equals the brute-force nearest code on random floats", "[kernels][convert]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> exps(-20, 18);
  for (int i = 0; i < 200000; ++i) {
    float x = (i % 4 == 0)
                  ? randomFloatAnyBits(rng)
                  : std::ldexp(float(rng() % 65536) / 65536.0f + 0.5f, exps(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
    if (i % 7 == 0) x = std::ldexp(float(int(rng() % 64)), exps(rng) - 3);  // exact ties are common here
    INFO("x = " << x);
    if (std::isnan(x)) {
      REQUIRE(std::isnan(hoccl::toFloat(hoccl::fromFloat<fp8e4m3_t>(x))));
      REQUIRE(std::isnan(hoccl::toFloat(hoccl::fromFloat<fp8e5m2_t>(x))));
      continue;
    }
    REQUIRE(hoccl::fromFloat<fp8e4m3_t>(x).bits == bruteFp8(x, refDecodeE4M3));
    REQUIRE(hoccl::fromFloat<fp8e5m2_t>(x).bits == bruteFp8(x, refDecodeE5M2));
  }
}

TEST_CASE("fromDouble rounds once (no double rounding through float)", "[kernels][convert]") {
  // 1 + 2^-11 + 2^-40 is above the fp16 tie; rounding to float first would land on the tie and go to even (down).
  CHECK(halfOf(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)) == 0x3C01);
  CHECK(halfOf(1.0 + std::ldexp(1.0, -11)) == 0x3C00);
  CHECK(halfOf(1e300) == 0x7C00);
  CHECK(halfOf(-1e-300) == 0x8000);
  bf16_t b;
  k::fromDouble(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), &b, hocclBfloat16);
  CHECK(b.bits == 0x3F81);
  fp8e4m3_t e;
  k::fromDouble(1e300, &e, hocclFloat8e4m3);
  CHECK(e.bits == 0x7E);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> exps(-18, 10);
  for (int i = 0; i < 100000; ++i) {
    const double x = std::ldexp(double(rng() >> 11) / 9007199254740992.0 + 0.5, exps(rng)) * ((rng() & 1) ? -1 : 1);
    fp8e4m3_t q4;
    fp8e5m2_t q5;
    k::fromDouble(x, &q4, hocclFloat8e4m3);
    k::fromDouble(x, &q5, hocclFloat8e5m2);
    INFO("x = " << x);
    REQUIRE(q4.bits == bruteFp8(x, refDecodeE4M3));
    REQUIRE(q5.bits == bruteFp8(x, refDecodeE5M2));
    // fp16: the result is at least as close as both neighbouring codes.
    const uint16_t h = halfOf(x);
    const double err = std::fabs(refDecodeHalf(h) - x);
    REQUIRE(err <= std::fabs(refDecodeHalf(uint16_t(h + 1)) - x));
    if ((h & 0x7FFF) != 0) REQUIRE(err <= std::fabs(refDecodeHalf(uint16_t(h - 1)) - x));
  }
  int32_t i32;
  k::fromDouble(3e10, &i32, hocclInt32);
  CHECK(i32 == std::numeric_limits<int32_t>::max());
  uint8_t u8;
  k::fromDouble(-5.0, &u8, hocclUint8);
  CHECK(u8 == 0);
  uint64_t u64;
  k::fromDouble(1e30, &u64, hocclUint64);
  CHECK(u64 == std::numeric_limits<uint64_t>::max());
  k::fromDouble(std::nan(""), &i32, hocclInt32);
  CHECK(i32 == 0);
  k::fromDouble(-2.5, &i32, hocclInt32);
  CHECK(i32 == -3);
}

// ---------------------------------------------------------------------------------------------------------------
// Reductions.

namespace {

using Bytes = std::vector<unsigned char>;
using ReduceFn = void (*)(void*, const void*, const void*, size_t, hocclDataType_t, k::BinOp);

struct Isa {
  const char* name;
  ReduceFn reduce;
  void (*scale)(void*, const void*, size_t, hocclDataType_t, const void*);
  void (*divide)(void*, size_t, hocclDataType_t, int);
};

std::vector<Isa> isas() {
  std::vector<Isa> v = {{"dispatch", k::reduce, k::scale, k::divide},
                        {"baseline", k::baseline::reduce, k::baseline::scale, k::baseline::divide}};
  if (k::avx2Usable()) v.push_back({"avx2", k::avx2::reduce, k::avx2::scale, k::avx2::divide});
  return v;
}

bool isSigned(hocclDataType_t dt) { return dt == hocclInt8 || dt == hocclInt32 || dt == hocclInt64; }

/// Raw element bits, zero-extended.
uint64_t rawAt(const Bytes& buf, size_t i, hocclDataType_t dt) {
  const size_t sz = k::typeSize(dt);
  uint64_t r = 0;
  std::memcpy(&r, buf.data() + i * sz, sz);
  return r;
}

/// Signed view of an integer element (sign-extended from its width).
int64_t signedOf(uint64_t raw, hocclDataType_t dt) {
  const int bits = int(k::typeSize(dt) * 8);
  if (bits == 64) return int64_t(raw);
  const uint64_t m = 1ull << (bits - 1);
  return int64_t((raw ^ m) - m);
}

/// Reference for integer types: wrapping sum/product in 64-bit unsigned arithmetic, comparisons in the type's
/// signedness; truncated to the element width.
uint64_t refInt(uint64_t a, uint64_t b, hocclDataType_t dt, k::BinOp op) {
  const int bits = int(k::typeSize(dt) * 8);
  const uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
  uint64_t r = 0;
  switch (op) {
    case k::BinOp::Sum: r = a + b; break;
    case k::BinOp::Prod: r = a * b; break;
    case k::BinOp::Max: r = isSigned(dt) ? (signedOf(a, dt) > signedOf(b, dt) ? a : b) : (a > b ? a : b); break;
    case k::BinOp::Min: r = isSigned(dt) ? (signedOf(a, dt) < signedOf(b, dt) ? a : b) : (a < b ? a : b); break;
  }
  return r & mask;
}

/// Position of a floating element on the number line, in codes (so that neighbouring values differ by 1).
int64_t orderedCode(uint64_t raw, hocclDataType_t dt) {
  const int bits = int(k::typeSize(dt) * 8);
  const uint64_t signBit = 1ull << (bits - 1);
  const int64_t mag = int64_t(raw & (signBit - 1));
  return (raw & signBit) ? -mag : mag;
}

/// Exact (long double) result of the operation, for floating types.
long double exactFloat(double x, double y, k::BinOp op) {
  switch (op) {
    case k::BinOp::Sum: return (long double)x + y;
    case k::BinOp::Prod: return (long double)x * y;
    case k::BinOp::Max: return x > y ? x : y;
    case k::BinOp::Min: return x < y ? x : y;
  }
  return 0;
}

/// Allowed distance in codes between a result and the correctly rounded exact result: 0 for float (its inputs'
/// sums and products are exact in double and long double), 1 for double (a long double reference can itself be
/// rounded twice) and for the low-precision types (computed in float, then rounded again).
int64_t allowedCodes(hocclDataType_t dt, k::BinOp op) {
  if (op == k::BinOp::Max || op == k::BinOp::Min || dt == hocclFloat32) return 0;
  return 1;
}

/// Random elements: integers over their full range (so sums and products wrap), floating values of both signs with
/// magnitudes chosen per operation (products stay mostly finite; a few fp8 sums and products saturate).
Bytes randomData(hocclDataType_t dt, size_t n, k::BinOp op, std::mt19937_64& rng) {
  const size_t sz = k::typeSize(dt);
  Bytes buf(n * sz);
  if (!k::isFloatType(dt)) {
    for (auto& c : buf) c = static_cast<unsigned char>(rng());
    return buf;
  }
  const double range = op == k::BinOp::Prod ? 24.0 : (op == k::BinOp::Sum ? 300.0 : 1e4);
  std::uniform_real_distribution<double> dist(-range, range);
  for (size_t i = 0; i < n; ++i) {
    double v = dist(rng);
    if (i % 5 == 1) v = std::ldexp(v, -12);  // small values, subnormal for the fp8 and fp16 types
    k::fromDouble(v, buf.data() + i * sz, dt);
  }
  return buf;
}

/// Applies the shared functor to one element pair (the math the GPU runs).
template <typename T>
T viaFunctor(T a, T b, k::BinOp op) {
  switch (op) {
    case k::BinOp::Sum: return hoccl::FuncSum<T>()(a, b);
    case k::BinOp::Prod: return hoccl::FuncProd<T>()(a, b);
    case k::BinOp::Max: return hoccl::FuncMax<T>()(a, b);
    case k::BinOp::Min: return hoccl::FuncMin<T>()(a, b);
  }
  return a;
}

uint64_t functorAt(const Bytes& a, const Bytes& b, size_t i, hocclDataType_t dt, k::BinOp op) {
  uint64_t r = 0;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T x, y;
    std::memcpy(&x, a.data() + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b.data() + i * sizeof(T), sizeof(T));
    const T z = viaFunctor(x, y, op);
    std::memcpy(&r, &z, sizeof(T));
  };
  switch (dt) {
    case hocclInt8: run(int8_t()); break;
    case hocclUint8: run(uint8_t()); break;
    case hocclInt32: run(int32_t()); break;
    case hocclUint32: run(uint32_t()); break;
    case hocclInt64: run(int64_t()); break;
    case hocclUint64: run(uint64_t()); break;
    case hocclFloat16: run(half_t()); break;
    case hocclFloat32: run(float()); break;
    case hocclFloat64: run(double()); break;
    case hocclBfloat16: run(bf16_t()); break;
    case hocclFloat8e4m3: run(fp8e4m3_t()); break;
    case hocclFloat8e5m2: run(fp8e5m2_t()); break;
    default: break;
  }
  return r;
}

/// Checks out[i] = op(a[i], b[i]) against the independent reference and against the functor, element by element;
/// stops at the first mismatch with a message naming it.
void checkReduced(const Bytes& out, const Bytes& a, const Bytes& b, size_t n, hocclDataType_t dt, k::BinOp op) {
  const size_t sz = k::typeSize(dt);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t got = rawAt(out, i, dt);
    const uint64_t fun = functorAt(a, b, i, dt, op);
    if (!k::isFloatType(dt)) {
      const uint64_t want = refInt(rawAt(a, i, dt), rawAt(b, i, dt), dt, op);
      if (got != want || fun != want) {
        FAIL_CHECK("element " << i << ": got " << got << ", functor " << fun << ", reference " << want);
        return;
      }
      continue;
    }
    const double x = k::toDouble(a.data() + i * sz, dt), y = k::toDouble(b.data() + i * sz, dt);
    const long double exact = exactFloat(x, y, op);
    uint64_t want = 0;
    if (dt == hocclFloat64) {
      const double d = double(exact);
      std::memcpy(&want, &d, 8);
    } else {
      k::fromDouble(double(exact), &want, dt);  // exact fits a double for float and narrower inputs
    }
    const int64_t dist = std::llabs(orderedCode(got, dt) - orderedCode(want, dt));
    if (got != fun || dist > allowedCodes(dt, op)) {
      FAIL_CHECK("element " << i << ": " << x << " " << k::opName(op) << " " << y << " gave " << k::toDouble(&got, dt)
                            << " (bits " << got << "), functor bits " << fun << ", reference " << k::toDouble(&want, dt)
                            << " (bits " << want << ")");
      return;
    }
  }
}

}  // namespace

TEST_CASE("reduce: every type x operation x ISA x aliasing against the reference", "[kernels][reduce]") {
  std::mt19937_64 rng(2024);
  const size_t sizes[] = {1, 7, 33, 1000};
  for (const Isa& isa : isas()) {
    for (hocclDataType_t dt : kAllTypes) {
      for (k::BinOp op : kAllOps) {
        for (size_t n : sizes) {
          const size_t sz = k::typeSize(dt);
          const Bytes a = randomData(dt, n, op, rng), b = randomData(dt, n, op, rng);
          INFO(isa.name << " " << k::typeName(dt) << " " << k::opName(op) << " n=" << n);
          Bytes out(n * sz, 0xCD);
          isa.reduce(out.data(), a.data(), b.data(), n, dt, op);
          {
            INFO("distinct buffers");
            checkReduced(out, a, b, n, dt, op);
          }
          Bytes inA = a;
          isa.reduce(inA.data(), inA.data(), b.data(), n, dt, op);
          {
            INFO("dst == a");
            checkReduced(inA, a, b, n, dt, op);
          }
          Bytes inB = b;
          isa.reduce(inB.data(), a.data(), inB.data(), n, dt, op);
          {
            INFO("dst == b");
            checkReduced(inB, a, b, n, dt, op);
          }
        }
      }
    }
  }
}

TEST_CASE("reduce: 1000003 elements, in place and distinct, every type and operation", "[kernels][reduce][large]") {
  std::mt19937_64 rng(99);
  const size_t n = 1000003;
  for (hocclDataType_t dt : kAllTypes) {
    for (k::BinOp op : kAllOps) {
      INFO(k::typeName(dt) << " " << k::opName(op));
      const Bytes a = randomData(dt, n, op, rng), b = randomData(dt, n, op, rng);
      Bytes inA = a;
      k::reduce(inA.data(), inA.data(), b.data(), n, dt, op);
      checkReduced(inA, a, b, n, dt, op);
      // The other builds must agree with the dispatcher bit for bit on the distinct-buffer form.
      for (const Isa& isa : isas()) {
        Bytes out(n * k::typeSize(dt));
        isa.reduce(out.data(), a.data(), b.data(), n, dt, op);
        INFO(isa.name);
        REQUIRE(out == inA);
      }
    }
  }
}

TEST_CASE("reduce: n == 0 and invalid types leave memory untouched", "[kernels][reduce]") {
  Bytes a(64, 1), b(64, 2), out(64, 0xAB);
  const Bytes before = out;
  for (hocclDataType_t dt : kAllTypes) k::reduce(out.data(), a.data(), b.data(), 0, dt, k::BinOp::Sum);
  k::reduce(out.data(), a.data(), b.data(), 8, hocclDataType_t(12), k::BinOp::Sum);
  k::reduce(out.data(), a.data(), b.data(), 8, hocclDataType_t(-3), k::BinOp::Sum);
  k::scale(out.data(), a.data(), 8, hocclDataType_t(12), b.data());
  k::divide(out.data(), 8, hocclDataType_t(12), 2);
  k::divide(out.data(), 8, hocclFloat32, 0);
  k::divide(out.data(), 8, hocclInt32, -4);
  CHECK(out == before);
  // nullptr is fine when nothing is to be done.
  k::reduce(nullptr, nullptr, nullptr, 0, hocclFloat32, k::BinOp::Sum);
  k::copy(nullptr, nullptr, 0);
}

TEST_CASE("reduce: special values (overflow, saturation, wrap, NaN, signed zero)", "[kernels][reduce]") {
  auto one = [](auto x, auto y, k::BinOp op, hocclDataType_t dt) {
    decltype(x) r;
    k::reduce(&r, &x, &y, 1, dt, op);
    return r;
  };
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  CHECK(one(half_t{0x7BFF}, half_t{0x7BFF}, k::BinOp::Sum, hocclFloat16).bits == 0x7C00);     // 65504+65504 -> inf
  CHECK(one(bf16_t{0x7F7F}, bf16_t{0x7F7F}, k::BinOp::Sum, hocclBfloat16).bits == 0x7F80);    // max+max -> inf
  CHECK(one(fp8e4m3_t{0x7E}, fp8e4m3_t{0x7E}, k::BinOp::Sum, hocclFloat8e4m3).bits == 0x7E);  // saturates
  CHECK(one(fp8e5m2_t{0x7B}, fp8e5m2_t{0x7B}, k::BinOp::Prod, hocclFloat8e5m2).bits == 0x7B);
  CHECK(one(fp8e4m3_t{0xFE}, fp8e4m3_t{0x7E}, k::BinOp::Prod, hocclFloat8e4m3).bits == 0xFE);
  CHECK(one(int8_t(127), int8_t(1), k::BinOp::Sum, hocclInt8) == -128);
  CHECK(one(uint8_t(255), uint8_t(2), k::BinOp::Sum, hocclUint8) == 1);
  CHECK(one(std::numeric_limits<int32_t>::max(), int32_t(1), k::BinOp::Sum, hocclInt32) ==
        std::numeric_limits<int32_t>::min());
  CHECK(one(int32_t(65536), int32_t(65536), k::BinOp::Prod, hocclInt32) == 0);
  CHECK(one(int8_t(-128), int8_t(-1), k::BinOp::Prod, hocclInt8) == -128);
  CHECK(one(std::numeric_limits<int64_t>::min(), int64_t(-1), k::BinOp::Sum, hocclInt64) ==
        std::numeric_limits<int64_t>::max());
  CHECK(one(int32_t(-5), int32_t(3), k::BinOp::Max, hocclInt32) == 3);
  CHECK(one(uint32_t(0xFFFFFFFFu), uint32_t(3), k::BinOp::Max, hocclUint32) == 0xFFFFFFFFu);
  CHECK(one(int64_t(-7), int64_t(2), k::BinOp::Min, hocclInt64) == -7);
  // Max/min ignore a single NaN (fmax/fmin), sums propagate it.
  CHECK(one(nan, 2.0f, k::BinOp::Max, hocclFloat32) == 2.0f);
  CHECK(one(2.0f, nan, k::BinOp::Min, hocclFloat32) == 2.0f);
  CHECK(std::isnan(one(nan, nan, k::BinOp::Max, hocclFloat32)));
  CHECK(std::isnan(one(nan, 1.0f, k::BinOp::Sum, hocclFloat32)));
  CHECK(std::isnan(one(inf, -inf, k::BinOp::Sum, hocclFloat32)));
  CHECK(one(1.0, std::nan(""), k::BinOp::Max, hocclFloat64) == 1.0);
  CHECK(std::isnan(hoccl::toFloat(one(half_t{0x7E00}, half_t{0x3C00}, k::BinOp::Sum, hocclFloat16))));
  CHECK(one(half_t{0x7E00}, half_t{0x3C00}, k::BinOp::Max, hocclFloat16).bits == 0x3C00);
  CHECK(one(fp8e4m3_t{0x7F}, fp8e4m3_t{0x38}, k::BinOp::Min, hocclFloat8e4m3).bits == 0x38);
  CHECK(one(bf16_t{0x7FC0}, bf16_t{0x3F80}, k::BinOp::Max, hocclBfloat16).bits == 0x3F80);
  // Subnormal arithmetic is exact where the result is representable.
  CHECK(one(half_t{0x0001}, half_t{0x0001}, k::BinOp::Sum, hocclFloat16).bits == 0x0002);
  CHECK(one(fp8e4m3_t{0x01}, fp8e4m3_t{0x07}, k::BinOp::Sum, hocclFloat8e4m3).bits == 0x08);
  CHECK(one(-0.0f, -0.0f, k::BinOp::Sum, hocclFloat32) == 0.0f);
  CHECK(std::signbit(one(-0.0f, -0.0f, k::BinOp::Sum, hocclFloat32)));
  // The F16C path (8 at a time) must handle the same specials as the scalar path.
  std::vector<half_t> ha(16, half_t{0x7BFF}), hb(16, half_t{0x7BFF}), hr(16);
  hb[3] = half_t{0x7E00};
  k::reduce(hr.data(), ha.data(), hb.data(), 16, hocclFloat16, k::BinOp::Sum);
  for (int i = 0; i < 16; ++i) {
    if (i == 3) CHECK(std::isnan(hoccl::toFloat(hr[i])));
    else CHECK(hr[i].bits == 0x7C00);
  }
}

TEST_CASE("scale (PreMulSum) and divide (Avg) against the reference", "[kernels][reduce]") {
  std::mt19937_64 rng(77);
  for (const Isa& isa : isas()) {
    for (hocclDataType_t dt : kAllTypes) {
      for (size_t n : {size_t(1), size_t(7), size_t(1001)}) {
        const size_t sz = k::typeSize(dt);
        INFO(isa.name << " " << k::typeName(dt) << " n=" << n);
        const Bytes src = randomData(dt, n, k::BinOp::Prod, rng);
        // scale: the same as a product with a broadcast scalar.
        Bytes scalar = randomData(dt, 1, k::BinOp::Prod, rng);
        Bytes broadcast(n * sz);
        for (size_t i = 0; i < n; ++i) std::memcpy(broadcast.data() + i * sz, scalar.data(), sz);
        Bytes out(n * sz);
        isa.scale(out.data(), src.data(), n, dt, scalar.data());
        checkReduced(out, src, broadcast, n, dt, k::BinOp::Prod);
        Bytes inPlace = src;
        isa.scale(inPlace.data(), inPlace.data(), n, dt, scalar.data());
        CHECK(inPlace == out);
        // divide: integers by C division; floating types within the rounding of a reciprocal multiply.
        for (int divisor : {1, 3, 8, 7}) {
          INFO("divisor " << divisor);
          Bytes data = src;
          isa.divide(data.data(), n, dt, divisor);
          for (size_t i = 0; i < n; ++i) {
            const uint64_t got = rawAt(data, i, dt), in = rawAt(src, i, dt);
            uint64_t want = 0;
            if (!k::isFloatType(dt)) {
              const uint64_t q = isSigned(dt) ? uint64_t(signedOf(in, dt) / divisor) : in / uint64_t(divisor);
              want = q & (sz == 8 ? ~0ull : ((1ull << (sz * 8)) - 1));
              if (got != want) FAIL_CHECK("element " << i << ": " << got << " != " << want);
              if (got != want) break;
              continue;
            }
            const double exact = k::toDouble(src.data() + i * sz, dt) / divisor;
            if (dt == hocclFloat64) {
              std::memcpy(&want, &exact, 8);
            } else {
              k::fromDouble(exact, &want, dt);
            }
            // x * (1/d) is within one code of x / d, and exact for powers of two.
            const int64_t dist = std::llabs(orderedCode(got, dt) - orderedCode(want, dt));
            if (dist > ((divisor & (divisor - 1)) == 0 ? 0 : 1)) {
              FAIL_CHECK("element " << i << ": " << k::toDouble(&got, dt) << " vs " << exact);
              break;
            }
          }
        }
      }
    }
  }
}

TEST_CASE("copy matches memcpy for odd sizes and offsets", "[kernels]") {
  std::mt19937_64 rng(1);
  for (size_t bytes : {size_t(1), size_t(31), size_t(4097), size_t(3 << 20) + 5}) {
    Bytes src(bytes + 8), dst(bytes + 8, 0);
    for (auto& c : src) c = static_cast<unsigned char>(rng());
    k::copy(dst.data() + 3, src.data() + 1, bytes);
    CHECK(std::memcmp(dst.data() + 3, src.data() + 1, bytes) == 0);
    CHECK(dst[0] == 0);
    CHECK(dst[bytes + 3] == 0);
  }
}

TEST_CASE("copy is exact for every offset of the destination against the source, around glibc's thresholds",
          "[kernels]") {
  // The skewed pairs (destination 1-31 bytes past the source in a cache line) take copy()'s own loop from
  // kSkewedCopyMinBytes up; the others memcpy. Every relative offset, both sides of the threshold, odd tails.
  std::mt19937_64 rng(3);
  const size_t sizes[] = {k::kSkewedCopyMinBytes, k::kSkewedCopyMinBytes + 1, 4096 + 3, (64 << 10) + 17, 300001};
  for (size_t bytes : sizes) {
    for (size_t srcOff : {size_t(0), size_t(5), size_t(16)}) {
      for (size_t skew = 0; skew < 64; ++skew) {
        const size_t dstOff = (srcOff + skew) % 64;
        Bytes src(bytes + 128), dst(bytes + 128, 0x5A);
        for (auto& c : src) c = static_cast<unsigned char>(rng());
        // Bytes' storage is only 16-byte aligned: place both pointers from a 64-byte boundary of each buffer.
        auto line = [](unsigned char* p) { return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64; };
        unsigned char* d = line(dst.data()) + dstOff;
        const unsigned char* s = line(src.data()) + srcOff;
        INFO("bytes " << bytes << ", source offset " << srcOff << ", destination offset " << dstOff);
        CHECK(k::skewedForMemcpy(d, s, bytes) == (skew >= 1 && skew <= 31 && bytes > k::kSkewedCopyMinBytes));
        k::copy(d, s, bytes);
        CHECK(std::memcmp(d, s, bytes) == 0);
        size_t outside = 0;
        for (unsigned char* p = dst.data(); p < dst.data() + dst.size(); ++p)
          if ((p < d || p >= d + bytes) && *p != 0x5A) ++outside;
        CHECK(outside == 0);
      }
    }
  }
}

TEST_CASE("copyStreaming matches memcpy for every head and tail, and writes nothing outside", "[kernels]") {
  std::mt19937_64 rng(2);
  // Below and above the streamed minimum, every destination offset in a cache line, odd tails, and a large copy.
  for (size_t bytes : {size_t(0), size_t(1), size_t(63), size_t(255), size_t(256), size_t(257), size_t(4097),
                       size_t(1 << 20) + 77, size_t(9 << 20) + 3}) {
    for (size_t dstOff : {size_t(0), size_t(1), size_t(17), size_t(63)}) {
      const size_t srcOff = (dstOff * 7 + 5) % 64;
      Bytes src(bytes + 128), dst(bytes + 128, 0xA5);
      for (auto& c : src) c = static_cast<unsigned char>(rng());
      k::copyStreaming(dst.data() + dstOff, src.data() + srcOff, bytes);
      INFO("bytes " << bytes << ", destination offset " << dstOff << ", source offset " << srcOff);
      CHECK(std::memcmp(dst.data() + dstOff, src.data() + srcOff, bytes) == 0);
      size_t outside = 0;
      for (size_t i = 0; i < dst.size(); ++i)
        if ((i < dstOff || i >= dstOff + bytes) && dst[i] != 0xA5) ++outside;
      CHECK(outside == 0);
    }
  }
}
