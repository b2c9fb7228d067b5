/// @file cuda_driver.cc
/// Run-time access to four CUDA driver entry points through dlopen("libcuda.so.1"). The driver is loaded once, on
/// first use; a host without it (or without a CUDA context in this process) sees only host memory.
#include "kernels/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <fmt/format.h>

namespace hoccl::cuda {
namespace {

// Driver ABI facts (cuda.h): CUresult is an int, CUdeviceptr a 64-bit integer.
using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr int kAttrMemoryType = 2;      // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrIsManaged = 8;       // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr int kAttrDeviceOrdinal = 9;   // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE
constexpr unsigned kMemTypeArray = 3;   // CU_MEMORYTYPE_ARRAY

struct Driver {
  void* lib = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGetCount)(int*) = nullptr;
  CUresult (*pointerGetAttribute)(void*, int, unsigned long long) = nullptr;
  CUresult (*streamSynchronize)(void*) = nullptr;
  CUresult (*streamIsCapturing)(void*, int*) = nullptr;
  CUresult (*getErrorString)(CUresult, const char**) = nullptr;
  DriverApi api;
};

template <class F>
void bind(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
}

// Loaded once, on first use (a function-local static: after the first call, one acquire load).
const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    x.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!x.lib) return x;
    bind(x.lib, "cuInit", x.init);
    bind(x.lib, "cuDeviceGetCount", x.deviceGetCount);
    bind(x.lib, "cuPointerGetAttribute", x.pointerGetAttribute);
    bind(x.lib, "cuStreamSynchronize", x.streamSynchronize);
    bind(x.lib, "cuStreamIsCapturing", x.streamIsCapturing);
    bind(x.lib, "cuGetErrorString", x.getErrorString);
    DriverApi& a = x.api;
    bind(x.lib, "cuInit", a.init);
    bind(x.lib, "cuDeviceGet", a.deviceGet);
    bind(x.lib, "cuDeviceGetName", a.deviceGetName);
    bind(x.lib, "cuDevicePrimaryCtxRetain", a.primaryCtxRetain);
    bind(x.lib, "cuCtxSetCurrent", a.ctxSetCurrent);
    bind(x.lib, "cuCtxGetCurrent", a.ctxGetCurrent);
    bind(x.lib, "cuCtxGetDevice", a.ctxGetDevice);
    bind(x.lib, "cuMemAlloc_v2", a.memAlloc);
    bind(x.lib, "cuMemFree_v2", a.memFree);
    bind(x.lib, "cuMemcpy", a.memcpy);
    bind(x.lib, "cuMemcpyAsync", a.memcpyAsync);
    bind(x.lib, "cuMemHostAlloc", a.memHostAlloc);
    bind(x.lib, "cuMemFreeHost", a.memFreeHost);
    bind(x.lib, "cuMemHostGetDevicePointer_v2", a.memHostGetDevicePointer);
    bind(x.lib, "cuMemGetAddressRange_v2", a.memGetAddressRange);
    bind(x.lib, "cuStreamCreate", a.streamCreate);
    bind(x.lib, "cuStreamDestroy_v2", a.streamDestroy);
    bind(x.lib, "cuStreamQuery", a.streamQuery);
    bind(x.lib, "cuStreamSynchronize", a.streamSynchronize);
    bind(x.lib, "cuStreamWaitEvent", a.streamWaitEvent);
    bind(x.lib, "cuStreamWaitValue32_v2", a.streamWaitValue32);
    bind(x.lib, "cuLaunchHostFunc", a.launchHostFunc);
    bind(x.lib, "cuEventCreate", a.eventCreate);
    bind(x.lib, "cuEventDestroy_v2", a.eventDestroy);
    bind(x.lib, "cuEventRecord", a.eventRecord);
    bind(x.lib, "cuEventQuery", a.eventQuery);
    bind(x.lib, "cuIpcGetMemHandle", a.ipcGetMemHandle);
    bind(x.lib, "cuIpcOpenMemHandle_v2", a.ipcOpenMemHandle);
    bind(x.lib, "cuIpcCloseMemHandle", a.ipcCloseMemHandle);
    bind(x.lib, "cuDeviceGetPCIBusId", a.deviceGetPCIBusId);
    bind(x.lib, "cuDeviceGetByPCIBusId", a.deviceGetByPCIBusId);
    bind(x.lib, "cuDeviceCanAccessPeer", a.deviceCanAccessPeer);
    bind(x.lib, "cuDeviceGetAttribute", a.deviceGetAttribute);
    bind(x.lib, "cuMemCreate", a.memCreate);
    bind(x.lib, "cuMemRelease", a.memRelease);
    bind(x.lib, "cuMemAddressReserve", a.memAddressReserve);
    bind(x.lib, "cuMemAddressFree", a.memAddressFree);
    bind(x.lib, "cuMemMap", a.memMap);
    bind(x.lib, "cuMemUnmap", a.memUnmap);
    bind(x.lib, "cuMemSetAccess", a.memSetAccess);
    bind(x.lib, "cuMemGetAllocationGranularity", a.memGetAllocationGranularity);
    bind(x.lib, "cuMemExportToShareableHandle", a.memExportToShareableHandle);
    bind(x.lib, "cuMemImportFromShareableHandle", a.memImportFromShareableHandle);
    bind(x.lib, "cuMemRetainAllocationHandle", a.memRetainAllocationHandle);
    a.getErrorString = x.getErrorString;
    return x;
  }();
  return d;
}

std::string errorText(const Driver& d, CUresult r) {
  const char* s = nullptr;
  if (d.getErrorString && d.getErrorString(r, &s) == kSuccess && s) return fmt::format("{} (CUresult {})", s, r);
  return fmt::format("CUresult {}", r);
}

}  // namespace

bool driverLoaded() { return driver().lib != nullptr; }

PtrKind classify(const void* ptr) {
  const Driver& d = driver();
  if (!ptr || !d.pointerGetAttribute) return PtrKind::Host;
  const auto addr = reinterpret_cast<unsigned long long>(ptr);
  unsigned memType = 0;
  // Any error (not initialised: no context, so no device memory; invalid value: unknown to CUDA) means host.
  if (d.pointerGetAttribute(&memType, kAttrMemoryType, addr) != kSuccess) return PtrKind::Host;
  if (memType != kMemTypeDevice && memType != kMemTypeArray) return PtrKind::Host;
  unsigned managed = 0;
  if (d.pointerGetAttribute(&managed, kAttrIsManaged, addr) == kSuccess && managed) return PtrKind::Managed;
  return PtrKind::Device;
}

std::string streamSynchronize(void* stream) {
  const Driver& d = driver();
  if (!d.streamSynchronize) return "no CUDA driver (libcuda.so.1) is loaded in this process";
  const CUresult r = d.streamSynchronize(stream);
  if (r == kSuccess) return "";
  return "cuStreamSynchronize failed: " + errorText(d, r);
}

int pointerDevice(const void* ptr) {
  const Driver& d = driver();
  if (!ptr || !d.pointerGetAttribute) return -1;
  int ordinal = -1;
  if (d.pointerGetAttribute(&ordinal, kAttrDeviceOrdinal, reinterpret_cast<unsigned long long>(ptr)) != kSuccess)
    return -1;
  return ordinal;
}

int currentContextDevice() {
  const Driver& d = driver();
  if (!d.api.ctxGetCurrent || !d.api.ctxGetDevice) return -1;
  void* ctx = nullptr;
  if (d.api.ctxGetCurrent(&ctx) != kSuccess || !ctx) return -1;
  int device = -1;
  return d.api.ctxGetDevice(&device) == kSuccess ? device : -1;
}

bool streamCapturing(void* stream) {
  constexpr CUresult kCaptureImplicit = 906;  // CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: the legacy stream, mid-capture
  const Driver& d = driver();
  if (!d.streamIsCapturing) return false;
  int status = 0;  // CUstreamCaptureStatus: 0 none, 1 active, 2 invalidated
  const CUresult r = d.streamIsCapturing(stream, &status);
  if (r == kCaptureImplicit) return true;
  return r == kSuccess && status != 0;
}

const DriverApi* driverApi() { return driver().lib ? &driver().api : nullptr; }

std::string driverErrorText(int result) { return errorText(driver(), result); }

int deviceCount() {
  const Driver& d = driver();
  if (!d.init || !d.deviceGetCount || d.init(0) != kSuccess) return 0;
  int n = 0;
  return d.deviceGetCount(&n) == kSuccess ? n : 0;
}

}  // namespace hoccl::cuda
