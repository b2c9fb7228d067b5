/// @file type_dispatch.h
/// The one switch from a hocclDataType_t to the storage type the kernels compute with. The CPU loops, the simulated
/// device's kernels and the CUDA kernels' launchers all dispatch through it (host code; nvcc compiles it too).
#pragma once

#include <cstdint>

#include "hoccl/hoccl.h"
#include "kernels/types.h"

namespace hoccl::kernels {

/// Calls fn(T()) for the storage type T of dt and returns what it returns; for a value that is not a
/// hocclDataType_t, returns onInvalid() instead (which must return the same type, or throw).
template <typename Fn, typename Invalid>
auto withStorageType(hocclDataType_t dt, Fn&& fn, Invalid&& onInvalid) {
  switch (dt) {
    case hocclInt8: return fn(int8_t());
    case hocclUint8: return fn(uint8_t());
    case hocclInt32: return fn(int32_t());
    case hocclUint32: return fn(uint32_t());
    case hocclInt64: return fn(int64_t());
    case hocclUint64: return fn(uint64_t());
    case hocclFloat16: return fn(half_t());
    case hocclFloat32: return fn(float());
    case hocclFloat64: return fn(double());
    case hocclBfloat16: return fn(bf16_t());
    case hocclFloat8e4m3: return fn(fp8e4m3_t());
    case hocclFloat8e5m2: return fn(fp8e5m2_t());
    default: return onInvalid();
  }
}

}  // namespace hoccl::kernels
