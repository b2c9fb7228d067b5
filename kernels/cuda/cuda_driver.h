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
/// True when stream (a CUstream / cudaStream_t; null is the default stream) is being captured into a CUDA graph
/// (cuStreamIsCapturing: active or invalidated capture, or the legacy default stream while another stream is in a
/// global capture). False without a driver, on a driver without the call, or when the driver cannot say.
bool streamCapturing(void* stream);
/// The CUDA device (ordinal) holding device memory ptr (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL), or -1 when the driver
/// cannot say (no driver, host memory, not initialised).
int pointerDevice(const void* ptr);
/// The device (ordinal) of the calling thread's current CUDA context, as `cudaSetDevice` / `torch.cuda.set_device`
/// leave it, or -1 when the thread has none (or the driver is not initialised). Does not initialise the driver.
int currentContextDevice();
/// Number of CUDA devices (initialises the driver); 0 without a driver or on any error.
int deviceCount();

/// CUipcMemHandle: 64 opaque bytes, passed by value to cuIpcOpenMemHandle.
struct CuIpcMemHandle {
  char reserved[64];  ///< the driver's bytes
};

/// CUmemLocation (cuda.h's layout; checked against cuda.h by kernels/cuda/link_check.cu on nvcc builds).
struct CuMemLocation {
  int type = 0;  ///< CUmemLocationType: 1 = a device
  int id = 0;    ///< the device ordinal
};
/// CUmemAllocationProp (cuda.h's layout).
struct CuMemAllocationProp {
  int type = 0;                         ///< CUmemAllocationType: 1 = pinned
  int requestedHandleTypes = 0;         ///< CUmemAllocationHandleType bits: 1 = POSIX file descriptor
  CuMemLocation location;               ///< where the memory lives
  void* win32HandleMetaData = nullptr;  ///< zero on POSIX
  struct {
    unsigned char compressionType = 0;       ///< 0: not compressible
    unsigned char gpuDirectRDMACapable = 0;  ///< 0
    unsigned short usage = 0;                ///< 0
    unsigned char reserved[4] = {};          ///< zero
  } allocFlags;                              ///< CUmemAllocationProp::allocFlags
};
/// CUmemAccessDesc (cuda.h's layout).
struct CuMemAccessDesc {
  CuMemLocation location;  ///< who gets the access
  int flags = 0;           ///< CUmemAccess_flags: 3 = read-write
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
  int (*ctxGetCurrent)(void**) = nullptr;                                               ///< cuCtxGetCurrent
  int (*ctxGetDevice)(int*) = nullptr;                                                  ///< cuCtxGetDevice
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
  int (*deviceGetAttribute)(int*, int, int) = nullptr;                                    ///< cuDeviceGetAttribute
  int (*memCreate)(unsigned long long*, size_t, const CuMemAllocationProp*,
                   unsigned long long) = nullptr;   ///< cuMemCreate
  int (*memRelease)(unsigned long long) = nullptr;  ///< cuMemRelease
  int (*memAddressReserve)(unsigned long long*, size_t, size_t, unsigned long long,
                           unsigned long long) = nullptr;       ///< cuMemAddressReserve
  int (*memAddressFree)(unsigned long long, size_t) = nullptr;  ///< cuMemAddressFree
  int (*memMap)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long) = nullptr;  ///< cuMemMap
  int (*memUnmap)(unsigned long long, size_t) = nullptr;                                                ///< cuMemUnmap
  int (*memSetAccess)(unsigned long long, size_t, const CuMemAccessDesc*, size_t) = nullptr;  ///< cuMemSetAccess
  int (*memGetAllocationGranularity)(size_t*, const CuMemAllocationProp*,
                                     int) = nullptr;  ///< cuMemGetAllocationGranularity
  int (*memExportToShareableHandle)(void*, unsigned long long, int,
                                    unsigned long long) = nullptr;                 ///< cuMemExportToShareableHandle
  int (*memImportFromShareableHandle)(unsigned long long*, void*, int) = nullptr;  ///< cuMemImportFromShareableHandle
  int (*memRetainAllocationHandle)(unsigned long long*, void*) = nullptr;          ///< cuMemRetainAllocationHandle
};

/// The driver's entry points, or null without libcuda.so.1.
const DriverApi* driverApi();
/// "<name> (CUresult N)" for a driver result code.
std::string driverErrorText(int result);

}  // namespace hoccl::cuda
