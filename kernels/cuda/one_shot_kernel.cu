// The one-kernel all-reduce (kernels/device/one_shot_phases.h) on a GPU: one block of one_shot::kThreads threads runs the
// phases; thread 0 does the waits and the publishing, and a __syncthreads() after each phase (with every thread's
// system-wide fence before a publish) orders the block's writes before the words that announce them.
#include <cuda_runtime.h>

#include "kernels/cuda/reduce_cuda.h"
#include "kernels/device/one_shot_phases.h"
#include "kernels/reduce_ops.h"
#include "kernels/type_dispatch.h"

namespace hoccl::kernels::cuda {
namespace {

namespace os = hoccl::kernels::one_shot;

template <typename T, typename Op>
__global__ void oneShotKernel(os::Args a) {
  __shared__ int ok;
  const size_t t = threadIdx.x, T_ = blockDim.x;
  const size_t bytes = a.count * sizeof(T);
  if (t == 0) ok = os::waitSlotFree(a) ? 1 : 0;
  __syncthreads();
  if (!ok) return;
  os::copyIn(a, bytes, t, T_);
  __threadfence_system();
  __syncthreads();
  if (t == 0) {
    os::publish(a, bytes);
    ok = os::waitPublished(a, bytes) ? 1 : 0;
  }
  __syncthreads();
  if (!ok) return;
  os::reduce<T>(a, Op(), t, T_);
  __threadfence_system();
  __syncthreads();
  if (t == 0) os::finish(a);
}

template <typename T>
int launchOneShot(const os::Args& a, int op, cudaStream_t s) {
  switch (static_cast<BinOp>(op)) {
    case BinOp::Sum: oneShotKernel<T, FuncSum<T>><<<1, os::kThreads, 0, s>>>(a); break;
    case BinOp::Prod: oneShotKernel<T, FuncProd<T>><<<1, os::kThreads, 0, s>>>(a); break;
    case BinOp::Max: oneShotKernel<T, FuncMax<T>><<<1, os::kThreads, 0, s>>>(a); break;
    case BinOp::Min: oneShotKernel<T, FuncMin<T>><<<1, os::kThreads, 0, s>>>(a); break;
    default: return int(cudaErrorInvalidValue);
  }
  return int(cudaGetLastError());
}

template <typename T>
int preloadOneShot() {
  const void* kernels[] = {reinterpret_cast<const void*>(oneShotKernel<T, FuncSum<T>>),
                           reinterpret_cast<const void*>(oneShotKernel<T, FuncProd<T>>),
                           reinterpret_cast<const void*>(oneShotKernel<T, FuncMax<T>>),
                           reinterpret_cast<const void*>(oneShotKernel<T, FuncMin<T>>)};
  for (const void* k : kernels) {
    cudaFuncAttributes attrs;
    const cudaError_t r = cudaFuncGetAttributes(&attrs, k);
    if (r != cudaSuccess) return int(r);
  }
  return int(cudaSuccess);
}

}  // namespace
}  // namespace hoccl::kernels::cuda

using namespace hoccl::kernels::cuda;

int hocclCudaOneShotAllReduce(const hoccl::kernels::one_shot::Args* args, hocclDataType_t dt, int op,
                              hocclStream_t stream) {
  if (args->count == 0) return int(cudaSuccess);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  return hoccl::kernels::withStorageType(
      dt, [&](auto tag) { return launchOneShot<decltype(tag)>(*args, op, s); },
      [] { return int(cudaErrorInvalidValue); });
}

int hocclCudaOneShotPreload() {
  for (int t = 0; t < hocclNumTypes; ++t) {
    const int r = hoccl::kernels::withStorageType(
        static_cast<hocclDataType_t>(t), [](auto tag) { return preloadOneShot<decltype(tag)>(); },
        [] { return int(cudaErrorInvalidValue); });
    if (r != int(cudaSuccess)) return r;
  }
  return int(cudaSuccess);
}
