// The CPU reduction loops compiled for AVX2 + F16C (see reduce_loops.inc), with fp16 going through the hardware
// converters 8 elements at a time. reduce.cc calls these only after checking the CPU.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/reduce_isa.h"
#include "kernels/reduce_ops.h"

#if defined(__x86_64__)
#include <immintrin.h>

// Everything defined below is compiled for AVX2 + F16C. The headers above are not: their inline functions keep the
// baseline target, so their out-of-line copies are safe to share with the baseline file.
#pragma GCC push_options
#pragma GCC target("avx2,f16c")

namespace hoccl::kernels::avx2 {
namespace {

/// Vector forms of the four operations on 8 floats (functor types, so every call inlines).
struct AddPs {
  __m256 operator()(__m256 x, __m256 y) const { return _mm256_add_ps(x, y); }
};
struct MulPs {
  __m256 operator()(__m256 x, __m256 y) const { return _mm256_mul_ps(x, y); }
};
/// fmax-like: x where x > y or y is NaN, else y (as FuncMax).
struct MaxLikePs {
  __m256 operator()(__m256 x, __m256 y) const {
    const __m256 pick = _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_GT_OQ), _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    return _mm256_blendv_ps(y, x, pick);
  }
};
/// fmin-like: x where x < y or y is NaN, else y (as FuncMin).
struct MinLikePs {
  __m256 operator()(__m256 x, __m256 y) const {
    const __m256 pick = _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_LT_OQ), _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    return _mm256_blendv_ps(y, x, pick);
  }
};

/// fp16 d = op(a, b): 8 elements per step through vcvtph2ps / vcvtps2ph (round to nearest even), scalar tail.
/// Loads precede the store of each step, so d may equal a or b.
template <typename V, typename S>
void halfLoop(uint16_t* d, const uint16_t* a, const uint16_t* b, size_t n, V vop, S sop) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(vop(x, y), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) d[i] = sop(half_t{a[i]}, half_t{b[i]}).bits;
}

void halfFast(void* dst, const void* a, const void* b, size_t n, BinOp op) {
  auto* d = static_cast<uint16_t*>(dst);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  switch (op) {
    case BinOp::Sum: halfLoop(d, x, y, n, AddPs(), FuncSum<half_t>()); break;
    case BinOp::Prod: halfLoop(d, x, y, n, MulPs(), FuncProd<half_t>()); break;
    case BinOp::Max: halfLoop(d, x, y, n, MaxLikePs(), FuncMax<half_t>()); break;
    case BinOp::Min: halfLoop(d, x, y, n, MinLikePs(), FuncMin<half_t>()); break;
  }
}

}  // namespace

#define HOCCL_HAVE_HALF_FAST 1
#include "kernels/cpu/reduce_loops.inc"
#undef HOCCL_HAVE_HALF_FAST

}  // namespace hoccl::kernels::avx2

#pragma GCC pop_options

namespace hoccl::kernels {
bool avx2Usable() {
  static const bool usable = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return usable;
}
}  // namespace hoccl::kernels

#else  // not x86-64: no AVX2 build; the dispatcher never calls into it.

namespace hoccl::kernels {
namespace avx2 {
void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op) {
  baseline::reduce(dst, a, b, n, dt, op);
}
void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar) {
  baseline::scale(dst, src, n, dt, scalar);
}
void divide(void* data, size_t n, hocclDataType_t dt, int divisor) { baseline::divide(data, n, dt, divisor); }
}  // namespace avx2
bool avx2Usable() { return false; }
}  // namespace hoccl::kernels

#endif
