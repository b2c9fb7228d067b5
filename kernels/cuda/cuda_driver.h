/// @file cuda_driver.h
/// The few CUDA driver calls hoccl needs today (the memory-kind seam, kernels/memory.h, and the NCCL shim), loaded
/// from libcuda.so.1 at run time (never linked): is a pointer device memory, synchronise a stream, is there a device
/// at all. Without a driver everything is host memory.
#pragma once

#include <cstddef>
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

/// CUipcMemHandle: 64 opaque bytes, passed by value to cuIpcOpenMemHandle.
struct CuIpcMemHandle {
  char reserved[64];  ///< the driver's bytes
};

/// The driver entry points the CUDA device (kernels/device/cuda_device.cc) uses, bound by name at load time; a
/// member is null when this driver lacks it. Types follow cuda.h's ABI: CUresult is int, CUdeviceptr an unsigned
/// long long, handles are pointers.
struct DriverApi {
  int (*init)(unsigned) = nullptr;                                                      ///< cuInit
  int (*deviceGet)(int*, int) = nullptr;                                                ///< cuDeviceGet
  int (*deviceGetName)(char*, int, int) = nullptr;                                      ///< cuDeviceGetName
  int (*primaryCtxRetain)(void**, int) = nullptr;                                       ///< cuDevicePrimaryCtxRetain
  int (*ctxSetCurrent)(void*) = nullptr;                                                ///< cuCtxSetCurrent
  int (*memAlloc)(unsigned long long*, size_t) = nullptr;                               ///< cuMemAlloc_v2
  int (*memFree)(unsigned long long) = nullptr;                                         ///< cuMemFree_v2
  int (*memcpy)(unsigned long long, unsigned long long, size_t) = nullptr;              ///< cuMemcpy
  int (*memcpyAsync)(unsigned long long, unsigned long long, size_t, void*) = nullptr;  ///< cuMemcpyAsync
  int (*memHostAlloc)(void**, size_t, unsigned) = nullptr;                              ///< cuMemHostAlloc
  int (*memFreeHost)(void*) = nullptr;                                                  ///< cuMemFreeHost
  int (*memHostGetDevicePointer)(unsigned long long*, void*, unsigned) = nullptr;  ///< cuMemHostGetDevicePointer_v2
  int (*memGetAddressRange)(unsigned long long*, size_t*, unsigned long long) = nullptr;  ///< cuMemGetAddressRange_v2
  int (*streamCreate)(void**, unsigned) = nullptr;                                        ///< cuStreamCreate
  int (*streamDestroy)(void*) = nullptr;                                                  ///< cuStreamDestroy_v2
  int (*streamQuery)(void*) = nullptr;                                                    ///< cuStreamQuery
  int (*streamSynchronize)(void*) = nullptr;                                              ///< cuStreamSynchronize
  int (*streamWaitEvent)(void*, void*, unsigned) = nullptr;                               ///< cuStreamWaitEvent
  int (*streamWaitValue32)(void*, unsigned long long, unsigned, unsigned) = nullptr;      ///< cuStreamWaitValue32_v2
  int (*launchHostFunc)(void*, void (*)(void*), void*) = nullptr;                         ///< cuLaunchHostFunc
  int (*eventCreate)(void**, unsigned) = nullptr;                                         ///< cuEventCreate
  int (*eventDestroy)(void*) = nullptr;                                                   ///< cuEventDestroy_v2
  int (*eventRecord)(void*, void*) = nullptr;                                             ///< cuEventRecord
  int (*eventQuery)(void*) = nullptr;                                                     ///< cuEventQuery
  int (*ipcGetMemHandle)(CuIpcMemHandle*, unsigned long long) = nullptr;                  ///< cuIpcGetMemHandle
  int (*ipcOpenMemHandle)(unsigned long long*, CuIpcMemHandle, unsigned) = nullptr;       ///< cuIpcOpenMemHandle_v2
  int (*ipcCloseMemHandle)(unsigned long long) = nullptr;                                 ///< cuIpcCloseMemHandle
  int (*getErrorString)(int, const char**) = nullptr;                                     ///< cuGetErrorString
  int (*deviceGetPCIBusId)(char*, int, int) = nullptr;                                    ///< cuDeviceGetPCIBusId
  int (*deviceGetByPCIBusId)(int*, const char*) = nullptr;                                ///< cuDeviceGetByPCIBusId
  int (*deviceCanAccessPeer)(int*, int, int) = nullptr;                                   ///< cuDeviceCanAccessPeer
};

/// The driver's entry points, or null without libcuda.so.1.
const DriverApi* driverApi();
/// "<name> (CUresult N)" for a driver result code.
std::string driverErrorText(int result);

}  // namespace hoccl::cuda
