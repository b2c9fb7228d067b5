// Links the CUDA reduction kernels (kernels/cuda/reduce_kernels.cu) into an executable with the CUDA runtime, so a
// build with nvcc proves that they compile and link for every listed architecture. It launches nothing (the build
// machines have no GPU): it only checks that the three host launchers resolved.
#include <cstdio>

#include "kernels/cuda/reduce_cuda.h"

int main() {
  // Through volatile storage, so the linker must resolve each launcher and the compiler cannot fold the check.
  void* volatile launchers[] = {reinterpret_cast<void*>(&hocclCudaReduce), reinterpret_cast<void*>(&hocclCudaScale),
                                reinterpret_cast<void*>(&hocclCudaDivide)};
  bool linked = true;
  for (void* launcher : launchers) linked = linked && launcher != nullptr;
  std::printf("CUDA reduction kernels %s\n", linked ? "linked" : "missing");
  return linked ? 0 : 1;
}
