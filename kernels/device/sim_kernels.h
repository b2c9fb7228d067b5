/// @file sim_kernels.h
/// The CPU emulation of the device's element-wise kernels: every launch runs the grid of the CUDA launch (blocks x
/// threads of kernels/device/elementwise.h) thread by thread with the same head/pack/tail split and the functors of
/// kernels/reduce_ops.h. Used by the simulated device's streams; synchronous.
#pragma once

#include <cstddef>

#include "hoccl/hoccl.h"
#include "kernels/cpu/reduce.h"
#include "kernels/device/one_shot_phases.h"

namespace hoccl::kernels::sim {

/// dst = src, bytes long (no overlap), as a byte-typed copy kernel.
void copy(void* dst, const void* src, size_t bytes);
/// dst[i] = op(a[i], b[i]) for n elements of dt. Throws hoccl::Error for an invalid type.
void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op);
/// dst[i] = src[i] * scalar (scalar: one element of dt).
void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar);
/// data[i] /= divisor (divisor >= 1).
void divide(void* data, size_t n, hocclDataType_t dt, int divisor);
/// The one-kernel all-reduce (one_shot_phases.h): its phases in order, each over every thread of the block (the barriers
/// of the CUDA kernel fall between them). Waits for the peers' ranks as the kernel does; args' pointers must be
/// usable here (the simulated device's views).
void oneShotAllReduce(const one_shot::Args& args, hocclDataType_t dt, BinOp op);

}  // namespace hoccl::kernels::sim
