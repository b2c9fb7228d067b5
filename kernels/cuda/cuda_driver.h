/// @file cuda_driver.h
/// The few CUDA driver calls hoccl needs today (the memory-kind seam, kernels/memory.h, and the NCCL shim), loaded
/// from libcuda.so.1 at run time (never linked): is a pointer device memory, synchronise a stream, is there a device
/// at all. Without a driver everything is host memory.
#pragma once

#include <string>

namespace hoccl::cuda {

/// What the driver says about a pointer.
enum class PtrKind {
  Host,     ///< ordinary, pinned or registered host memory, or no driver / no CUDA context in this process
  Managed,  ///< CUDA managed (unified) memory: reachable from the host
  Device    ///< device memory: the host cannot read it
};

/// True when libcuda.so.1 could be loaded (not necessarily initialised).
bool driverLoaded();
/// Classifies ptr (null is Host).
PtrKind classify(const void* ptr);
/// Synchronises stream (a CUstream / cudaStream_t). Returns "" on success, else a description of the failure.
std::string streamSynchronize(void* stream);
/// Number of CUDA devices (initialises the driver); 0 without a driver or on any error.
int deviceCount();

}  // namespace hoccl::cuda
