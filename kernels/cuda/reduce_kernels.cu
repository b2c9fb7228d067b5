// CUDA reduction kernels: one grid-stride template per operation shape, instantiated for every hoccl data type
// with the functors of kernels/reduce_ops.h (the CPU unit tests check those functors, so the GPU math is the
// tested math). The split into a scalar head, 16-byte packs and a scalar tail, and the launch geometry, are those of
// kernels/device/elementwise.h, which the simulated device runs on the CPU too.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/reduce_cuda.h"
#include "kernels/device/elementwise.h"
#include "kernels/reduce_ops.h"
#include "kernels/type_dispatch.h"

namespace hoccl::kernels::cuda {
namespace {

namespace ew = hoccl::kernels::elementwise;
constexpr int kThreads = ew::kThreads;

/// dst[i] = op(a[i], b[i]). No __restrict__: dst may alias a or b element for element.
template <typename T, typename Op>
__global__ void binaryKernel(T* dst, const T* a, const T* b, ew::Split s, Op op) {
  ew::binaryThread(dst, a, b, s, op, size_t(blockIdx.x) * blockDim.x + threadIdx.x, size_t(gridDim.x) * blockDim.x);
}

/// dst[i] = f(src[i]).
template <typename T, typename F>
__global__ void unaryKernel(T* dst, const T* src, ew::Split s, F f) {
  ew::unaryThread(dst, src, s, f, size_t(blockIdx.x) * blockDim.x + threadIdx.x, size_t(gridDim.x) * blockDim.x);
}

/// Multiplication by a captured scalar (PreMulSum).
template <typename T>
using ScaleBy = ew::ScaleBy<T, FuncProd<T>>;

// Grid sizing to the device: the current device's multiprocessor count and resident threads per multiprocessor,
// read once per device ordinal (packed in one atomic word; 0 = not read yet), bound the grid (ew::blocksForDevice).
constexpr int kMaxDevices = 64;
std::atomic<uint64_t> deviceShape[kMaxDevices];

unsigned blocksFor(size_t n) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return ew::blocksFor(n);
  uint64_t shape = deviceShape[dev].load(std::memory_order_relaxed);
  if (shape == 0) {
    int sms = 0, threads = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, dev) != cudaSuccess)
      return ew::blocksFor(n);
    shape = uint64_t(uint32_t(sms)) << 32 | uint32_t(threads);
    deviceShape[dev].store(shape, std::memory_order_relaxed);
  }
  return ew::blocksForDevice(n, int(shape >> 32), int(shape & 0xffffffffu));
}

template <typename T, typename Op>
int launchBinary(void* dst, const void* a, const void* b, size_t n, cudaStream_t s) {
  const ew::Split sp = ew::split(dst, a, b, n, sizeof(T));
  binaryKernel<T, Op><<<blocksFor(n), kThreads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(a),
                                                        static_cast<const T*>(b), sp, Op());
  return int(cudaGetLastError());
}

template <typename T>
int launchReduce(void* dst, const void* a, const void* b, size_t n, BinOp op, cudaStream_t s) {
  switch (op) {
    case BinOp::Sum: return launchBinary<T, FuncSum<T>>(dst, a, b, n, s);
    case BinOp::Prod: return launchBinary<T, FuncProd<T>>(dst, a, b, n, s);
    case BinOp::Max: return launchBinary<T, FuncMax<T>>(dst, a, b, n, s);
    case BinOp::Min: return launchBinary<T, FuncMin<T>>(dst, a, b, n, s);
  }
  return int(cudaErrorInvalidValue);
}

/// cudaFuncGetAttributes of a kernel: loads it (lazy loading) and says whether that worked.
template <typename Kernel>
int load(Kernel kernel) {
  cudaFuncAttributes attrs;
  return int(cudaFuncGetAttributes(&attrs, kernel));
}

/// Loads the kernels of one type: the four reductions, the scaling and the division.
template <typename T>
int preloadType() {
  const int results[] = {load(binaryKernel<T, FuncSum<T>>), load(binaryKernel<T, FuncProd<T>>),
                         load(binaryKernel<T, FuncMax<T>>), load(binaryKernel<T, FuncMin<T>>),
                         load(unaryKernel<T, ScaleBy<T>>), load(unaryKernel<T, hoccl::FuncDivide<T>>)};
  for (int r : results)
    if (r != int(cudaSuccess)) return r;
  return int(cudaSuccess);
}

/// Calls fn(T()) for the storage type of dt; returns cudaErrorInvalidValue for an invalid type.
template <typename Fn>
int withType(hocclDataType_t dt, Fn&& fn) {
  return withStorageType(dt, fn, [] { return int(cudaErrorInvalidValue); });
}

}  // namespace
}  // namespace hoccl::kernels::cuda

using namespace hoccl::kernels::cuda;

int hocclCudaReduce(void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt, hoccl::kernels::BinOp op,
                    hocclStream_t stream) {
  if (n == 0) return int(cudaSuccess);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  return withType(dt, [&](auto tag) { return launchReduce<decltype(tag)>(dst, a, b, n, op, s); });
}

int hocclCudaScale(void* dst, const void* src, size_t n, hocclDataType_t dt, const void* scalar, hocclStream_t stream) {
  if (n == 0) return int(cudaSuccess);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  return withType(dt, [&](auto tag) {
    using T = decltype(tag);
    ScaleBy<T> f;
    std::memcpy(&f.scalar, scalar, sizeof(T));
    unaryKernel<<<blocksFor(n), kThreads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src),
                                                  ew::split(dst, src, nullptr, n, sizeof(T)), f);
    return int(cudaGetLastError());
  });
}

int hocclCudaDivide(void* data, size_t n, hocclDataType_t dt, int divisor, hocclStream_t stream) {
  if (divisor < 1) return int(cudaErrorInvalidValue);
  if (n == 0) return int(cudaSuccess);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  return withType(dt, [&](auto tag) {
    using T = decltype(tag);
    const hoccl::FuncDivide<T> f(divisor);
    unaryKernel<<<blocksFor(n), kThreads, 0, s>>>(static_cast<T*>(data), static_cast<const T*>(data),
                                                  ew::split(data, data, nullptr, n, sizeof(T)), f);
    return int(cudaGetLastError());
  });
}

int hocclCudaPreload() {
  for (int t = 0; t < hocclNumTypes; ++t) {
    const int r = withType(static_cast<hocclDataType_t>(t), [](auto tag) { return preloadType<decltype(tag)>(); });
    if (r != int(cudaSuccess)) return r;
  }
  (void)blocksFor(1);  // reads the device's shape now, not in a launch
  return int(cudaSuccess);
}
