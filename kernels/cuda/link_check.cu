// Links the CUDA reduction kernels (kernels/cuda/reduce_kernels.cu) into an executable with the CUDA runtime, so a
// build with nvcc proves that they compile and link for every listed architecture. It launches nothing (the build
// machines have no GPU): it only checks that the host launchers resolved.
#include <cuda.h>

#include <cstddef>
#include <cstdio>

#include "kernels/cuda/cuda_driver.h"
#include "kernels/cuda/reduce_cuda.h"

// The driver structures hoccl declares itself (kernels/cuda/cuda_driver.h, so libhoccl needs no CUDA header) have
// cuda.h's layout, and the constants the CUDA device passes (kernels/device/cuda_device.cc) are cuda.h's values.
static_assert(sizeof(hoccl::cuda::CuMemLocation) == sizeof(CUmemLocation), "CUmemLocation");
static_assert(sizeof(hoccl::cuda::CuMemAllocationProp) == sizeof(CUmemAllocationProp), "CUmemAllocationProp");
static_assert(offsetof(hoccl::cuda::CuMemAllocationProp, location) == offsetof(CUmemAllocationProp, location),
              "CUmemAllocationProp::location");
static_assert(offsetof(hoccl::cuda::CuMemAllocationProp, allocFlags) == offsetof(CUmemAllocationProp, allocFlags),
              "CUmemAllocationProp::allocFlags");
static_assert(sizeof(hoccl::cuda::CuMemAccessDesc) == sizeof(CUmemAccessDesc), "CUmemAccessDesc");
static_assert(offsetof(hoccl::cuda::CuMemAccessDesc, flags) == offsetof(CUmemAccessDesc, flags),
              "CUmemAccessDesc::flags");
static_assert(CU_MEM_ALLOCATION_TYPE_PINNED == 1 && CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR == 1 &&
                  CU_MEM_LOCATION_TYPE_DEVICE == 1 && CU_MEM_ACCESS_FLAGS_PROT_READWRITE == 3 &&
                  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED == 1 &&
                  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED == 102 &&
                  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED == 103,
              "cuMem constants");

int main() {
  // Through volatile storage, so the linker must resolve each launcher and the compiler cannot fold the check.
  void* volatile launchers[] = {reinterpret_cast<void*>(&hocclCudaReduce), reinterpret_cast<void*>(&hocclCudaScale),
                                reinterpret_cast<void*>(&hocclCudaDivide),
                                reinterpret_cast<void*>(&hocclCudaOneShotAllReduce),
                                reinterpret_cast<void*>(&hocclCudaOneShotPreload)};
  bool linked = true;
  for (void* launcher : launchers) linked = linked && launcher != nullptr;
  std::printf("CUDA reduction kernels %s\n", linked ? "linked" : "missing");
  return linked ? 0 : 1;
}
