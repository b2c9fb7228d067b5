/// @file reduce_isa.h
/// Internal: the per-instruction-set builds of the CPU loops behind kernels/cpu/reduce.h. reduce.cc picks one at
/// run time; the unit tests call each directly so that both are checked on a machine that has AVX2.
#pragma once

#include <cstddef>

#include "kernels/cpu/reduce.h"

namespace hoccl::kernels {

/// The loops compiled for the baseline x86-64 (SSE2) or whatever the build targets on other machines.
namespace baseline {
/// See hoccl::kernels::reduce (dt must be valid).
void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op);
/// See hoccl::kernels::scale (dt must be valid).
void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar);
/// See hoccl::kernels::divide (dt must be valid, divisor >= 1).
void divide(void* data, size_t n, hocclDataType_t dt, int divisor);
}  // namespace baseline

/// The same loops compiled for AVX2 + F16C (fp16 through the hardware converters). Only on x86-64.
namespace avx2 {
/// See hoccl::kernels::reduce (dt must be valid).
void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op);
/// See hoccl::kernels::scale (dt must be valid).
void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar);
/// See hoccl::kernels::divide (dt must be valid, divisor >= 1).
void divide(void* data, size_t n, hocclDataType_t dt, int divisor);
}  // namespace avx2

/// True when this build has the AVX2 loops and the CPU runs them (AVX2 and F16C present).
bool avx2Usable();

}  // namespace hoccl::kernels
