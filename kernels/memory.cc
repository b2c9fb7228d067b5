// The per-kind memory operations (see memory.h): the CPU kernels for both host kinds.
#include "kernels/memory.h"

#include "base/error.h"
#include "kernels/cuda/cuda_driver.h"

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

}  // namespace

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Host: return "host";
    case MemoryKind::HostShared: return "shared host";
    case MemoryKind::Device: return "device";
  }
  return "?";
}

MemoryKind classify(const void* ptr) {
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
  throwInvalidArgument(
      "device memory: this build of hoccl has no device memory operations yet (CUDA buffers are "
      "not supported); pass host buffers");
}

}  // namespace hoccl::kernels
