/// @file reduce_cuda.h
/// Host launchers for the CUDA reduction kernels (kernels/cuda/reduce_kernels.cu), with C names: the libhoccl-cuda
/// plugin exports them and kernels/device/cuda_device.cc finds them with dlsym. This header needs no CUDA
/// headers: streams are passed as hocclStream_t (a cudaStream_t cast to it; NULL is the legacy default stream) and
/// results are CUDA error codes as int (0 = cudaSuccess). All pointers are device (or managed) memory. The kernels
/// use the functors of kernels/reduce_ops.h, so they compute exactly what hoccl::kernels::reduce computes on the CPU.
#pragma once

#include <cstddef>

#include "hoccl/hoccl.h"
#include "kernels/cpu/reduce.h"
#include "kernels/device/one_shot_phases.h"

extern "C" {

/// Enqueues dst[i] = op(a[i], b[i]) for n elements on `stream`. dst may equal a or b exactly.
/// Returns 0 on success, cudaErrorInvalidValue (1) for an invalid type, else the launch's CUDA error code.
int hocclCudaReduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, hoccl::kernels::BinOp op,
                    hocclStream_t stream);

/// Enqueues dst[i] = src[i] * scalar (PreMulSum). `scalar` is one element of type dt in host memory, read before
/// the call returns. dst may equal src. Returns 0 or a CUDA error code.
int hocclCudaScale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar, hocclStream_t stream);

/// Enqueues data[i] = data[i] / divisor (Avg post-division, same rules as hoccl::kernels::divide).
/// Returns 0, cudaErrorInvalidValue (1) for an invalid type or divisor < 1, or a CUDA error code.
int hocclCudaDivide(void* data, size_t n, hocclDataType_t dt, int divisor, hocclStream_t stream);

/// Loads every kernel above into the current device's context now (cudaFuncGetAttributes on each). Under CUDA's lazy
/// loading (the default since CUDA 12.2) a kernel's first launch loads it, and loading may wait for the whole
/// context to go idle: a first launch by hoccl's proxy while the caller's stream waits for that proxy's flag never
/// returns (seen on an H200: the first device all-reduce of two ranks hung in cudaLaunchKernel). The CUDA device
/// calls this once, when it is created, before any stream waits on hoccl. Returns 0 or the first CUDA error code.
int hocclCudaPreload();

/// Enqueues the one-kernel all-reduce (kernels/device/one_shot_phases.h) of args->count elements of dt with op (a
/// hoccl::kernels::BinOp as int) on `stream`; *args is copied before the call returns. Returns 0,
/// cudaErrorInvalidValue (1) for an invalid type or op, or the launch's CUDA error code.
int hocclCudaOneShotAllReduce(const hoccl::kernels::one_shot::Args* args, hocclDataType_t dt, int op,
                              hocclStream_t stream);

/// Loads every one-kernel all-reduce (all types and ops) now, as hocclCudaPreload does for the others.
int hocclCudaOneShotPreload();

}  // extern "C"
