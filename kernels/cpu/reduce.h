/// @file reduce.h
/// CPU reduction kernels called by the executor, the perf tools and the tests. Host memory only.
///
/// Every function dispatches once on the data type (and the binary operation) to a vectorised loop. On x86-64
/// machines with AVX2 and F16C the loops compiled for that ISA are used (chosen once, at first call); otherwise the
/// baseline loops. Element semantics are those of kernels/reduce_ops.h.
///
/// Invalid arguments (a data type outside hocclInt8..hocclFloat8e5m2, a divisor < 1) leave the memory untouched:
/// the caller (the API edge) validates and reports; these functions cannot fail otherwise.
#pragma once

#include <cstddef>

#include "hoccl/hoccl.h"

namespace hoccl::kernels {

/// The element-wise binary operations. Avg is Sum followed by divide(); PreMulSum is scale() followed by Sum.
enum class BinOp { Sum, Prod, Max, Min };

/// Size of one element in bytes; 0 for an invalid type.
size_t typeSize(hocclDataType_t dt);
/// The nccl-tests name of the type (int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3
/// f8e5m2); "invalid" for an invalid type.
const char* typeName(hocclDataType_t dt);
/// True for half, float, double, bfloat16, f8e4m3 and f8e5m2.
bool isFloatType(hocclDataType_t dt);
/// Name of an operation: "sum", "prod", "max" or "min".
const char* opName(BinOp op);

/// dst[i] = op(a[i], b[i]) for n elements; dst may equal a or b exactly (same pointer), no other overlap.
void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op);
/// dst[i] = src[i] * scalar (scalar points to one element of type dt; dst may equal src): PreMulSum pre-scaling.
void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar);
/// data[i] = data[i] / divisor: C integer division for integer types (as NCCL's avg), multiplication by
/// 1/divisor computed in the compute precision (float for fp16/bf16/fp8/float, double for double) otherwise.
/// Does nothing when divisor < 1.
void divide(void* data, size_t n, hocclDataType_t dt, int divisor);

/// Reads one element as a double (exact for every type except 64-bit integers beyond 2^53).
double toDouble(const void* elem, hocclDataType_t dt);
/// Writes v as one element, rounded as the type rounds: a single round-to-nearest-even for floating types (fp16
/// and bf16 overflow to inf, fp8 saturates); integers are rounded to nearest, clamped to the type's range, NaN -> 0.
void fromDouble(double v, void* elem, hocclDataType_t dt);

/// The instruction set the loops run with: "avx2" or "baseline".
const char* isaName();

}  // namespace hoccl::kernels
