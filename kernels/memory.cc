// The per-kind memory operations (see memory.h): the CPU kernels for both host kinds, the device's kernels for
// device memory.
#include "kernels/memory.h"

#include "base/error.h"
#include "kernels/cpu/copy.h"
#include "kernels/cuda/cuda_driver.h"
#include "kernels/device/device.h"
#include "kernels/shared_mem.h"

namespace hoccl::kernels {
namespace {

/// Host memory, shared or not: the CPU loops.
class HostOps final : public MemoryOps {
 public:
  explicit HostOps(MemoryKind kind) : kind_(kind) {}
  MemoryKind kind() const override { return kind_; }
  void copy(void* dst, const void* src, size_t bytes) const override { kernels::copy(dst, src, bytes); }
  void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op) const override {
    kernels::reduce(dst, a, b, n, dt, op);
  }
  void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar) const override {
    kernels::scale(dst, src, n, dt, scalar);
  }
  void divide(void* data, size_t n, hocclDataType_t dt, int divisor) const override {
    kernels::divide(data, n, dt, divisor);
  }

 private:
  MemoryKind kind_;
};

thread_local device::Stream tlsStream = nullptr;

/// Device memory: the device's kernels on the calling thread's stream (setDeviceStream), waited for before
/// returning, so the executor sees each copy or reduction done like a host one.
class DeviceOps final : public MemoryOps {
 public:
  explicit DeviceOps(device::Device& dev) : dev_(dev) {}
  MemoryKind kind() const override { return MemoryKind::Device; }
  void copy(void* dst, const void* src, size_t bytes) const override {
    if (!bytes) return;
    dev_.launchCopy(tlsStream, dst, src, bytes);
    dev_.synchronize(tlsStream);
  }
  void reduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, BinOp op) const override {
    if (!n) return;
    dev_.launchReduce(tlsStream, dst, a, b, n, dt, op);
    dev_.synchronize(tlsStream);
  }
  void scale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar) const override {
    if (!n) return;
    dev_.launchScale(tlsStream, dst, src, n, dt, scalar);
    dev_.synchronize(tlsStream);
  }
  void divide(void* data, size_t n, hocclDataType_t dt, int divisor) const override {
    if (!n) return;
    dev_.launchDivide(tlsStream, data, n, dt, divisor);
    dev_.synchronize(tlsStream);
  }

 private:
  device::Device& dev_;
};

}  // namespace

void setDeviceStream(void* stream) { tlsStream = stream; }
void* deviceStream() { return tlsStream; }

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Host: return "host";
    case MemoryKind::HostShared: return "shared host";
    case MemoryKind::Device: return "device";
  }
  return "?";
}

MemoryKind classify(const void* ptr) {
  if (!ptr) return MemoryKind::Host;
  if (findShared(ptr, 0, nullptr)) return MemoryKind::HostShared;
  // Every call classifies its buffers: the device and the driver, each chosen once per process, are looked up once.
  static device::Device* const dev = device::current();
  if (dev) return dev->owns(ptr) ? MemoryKind::Device : MemoryKind::Host;
  static const bool driver = cuda::driverLoaded();
  if (!driver) return MemoryKind::Host;
  return cuda::classify(ptr) == cuda::PtrKind::Device ? MemoryKind::Device : MemoryKind::Host;
}

const MemoryOps& hostMemoryOps() {
  static const HostOps ops(MemoryKind::Host);
  return ops;
}

const MemoryOps& memoryOps(MemoryKind kind) {
  static const HostOps shared(MemoryKind::HostShared);
  switch (kind) {
    case MemoryKind::Host: return hostMemoryOps();
    case MemoryKind::HostShared: return shared;
    case MemoryKind::Device: break;
  }
  static const DeviceOps* ops = [] { return new DeviceOps(device::require("device memory")); }();
  return *ops;
}

}  // namespace hoccl::kernels
