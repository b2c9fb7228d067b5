/// @file memory.h
/// The memory-kind seam: every buffer of a call is classified once (host memory, host memory that peers on the same
/// host can map, device memory), and the copies and reductions on it go through the operations of its kind. Host
/// kinds run the CPU kernels (kernels/cpu/reduce.h); device memory runs the kernels of the process's device
/// (kernels/device/device.h: CUDA, or the simulated device) on the calling thread's device stream, and waits for them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hoccl/hoccl.h"
#include "kernels/cpu/reduce.h"

namespace hoccl::kernels {

/// Where a buffer lives.
enum class MemoryKind : uint8_t {
  Host,        ///< ordinary host memory of this process
  HostShared,  ///< host memory that peers on this host can map (hocclMemAlloc / registered shared segments)
  Device,      ///< GPU memory: the host cannot read it
};

/// True for the kinds the host can read and write (Host, HostShared).
inline bool isHostKind(MemoryKind kind) { return kind != MemoryKind::Device; }

/// Name for messages: "host", "shared host", "device".
const char* memoryKindName(MemoryKind kind);

/// Copies and reductions on memory of one kind. Semantics are those of kernels/cpu/reduce.h.
class MemoryOps {
 public:
  virtual ~MemoryOps() = default;
  /// The kind these operations serve.
  virtual MemoryKind kind() const = 0;
  /// dst = src, bytes long (no overlap).
  virtual void copy(void* dst, const void* src, size_t bytes) const = 0;
  /// dst[i] = op(a[i], b[i]) for n elements (dst may equal a or b exactly).
  virtual void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op) const = 0;
  /// dst[i] = src[i] * scalar (PreMulSum); scalar is one element of dt in host memory.
  virtual void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar) const = 0;
  /// data[i] /= divisor (Avg).
  virtual void divide(void* data, size_t n, hocclDataType_t dt, int divisor) const = 0;
};

/// The element-wise operation behind a reduction op: Sum for sum, avg (divided afterwards) and PreMulSum (scaled
/// before); Prod, Max, Min for themselves.
inline BinOp binOpOf(hocclRedOp_t op) {
  switch (op) {
    case hocclProd: return BinOp::Prod;
    case hocclMax: return BinOp::Max;
    case hocclMin: return BinOp::Min;
    default: return BinOp::Sum;
  }
}

/// Where `ptr` lives: Device for memory of the process's device (device::current(): the simulated device's
/// allocations, or CUDA device memory), and for CUDA device memory when no device is in use (the driver is asked when
/// libcuda.so.1 is loadable); Host otherwise (ordinary, pinned or CUDA managed memory, which the host can read).
/// HostShared for memory of hocclMemAlloc (kernels/shared_mem.h); null is Host.
MemoryKind classify(const void* ptr);

/// The operations for memory of `kind`. Throws hoccl::Error(hocclInvalidArgument) for Device memory when the process
/// has no device.
const MemoryOps& memoryOps(MemoryKind kind);

/// The device stream on which this thread's device MemoryOps launch (null: the device's default stream). The
/// communicator's proxy thread sets its internal stream.
void setDeviceStream(void* stream);
/// The calling thread's device stream (setDeviceStream; null: the device's default stream).
void* deviceStream();

/// The operations on host memory (the CPU kernels): what every host-kind call uses.
const MemoryOps& hostMemoryOps();

}  // namespace hoccl::kernels
