/// @file shim_common.cc
/// Shared pieces of the NCCL shim: the contract checks between nccl_abi.h and hoccl.h, the per-thread last error,
/// buffer and stream checks, and the load-time constructor that makes hoccl honour NCCL_* environment names.
#include "shim/shim_common.h"

#include <fmt/format.h>

#include "base/log.h"
#include "base/params.h"
#include "kernels/cuda/cuda_driver.h"
#include "kernels/device/device.h"
#include "kernels/memory.h"

// hoccl's C API uses NCCL's values, so casts between the two are exact. These asserts keep it that way.
static_assert(sizeof(ncclUniqueId) == sizeof(hocclUniqueId), "unique id size");
static_assert(sizeof(ncclResult_t) == sizeof(hocclResult_t), "result enum size");
static_assert(sizeof(ncclRedOp_t) == sizeof(hocclRedOp_t), "redop enum size");
static_assert(sizeof(ncclDataType_t) == sizeof(hocclDataType_t), "datatype enum size");
static_assert(static_cast<int>(ncclSuccess) == hocclSuccess &&
                  static_cast<int>(ncclUnhandledCudaError) == hocclUnhandledCudaError &&
                  static_cast<int>(ncclSystemError) == hocclSystemError &&
                  static_cast<int>(ncclInternalError) == hocclInternalError &&
                  static_cast<int>(ncclInvalidArgument) == hocclInvalidArgument &&
                  static_cast<int>(ncclInvalidUsage) == hocclInvalidUsage &&
                  static_cast<int>(ncclRemoteError) == hocclRemoteError &&
                  static_cast<int>(ncclInProgress) == hocclInProgress && static_cast<int>(ncclTimeout) == hocclTimeout,
              "result values");
static_assert(static_cast<int>(ncclSum) == hocclSum && static_cast<int>(ncclProd) == hocclProd &&
                  static_cast<int>(ncclMax) == hocclMax && static_cast<int>(ncclMin) == hocclMin &&
                  static_cast<int>(ncclAvg) == hocclAvg && static_cast<int>(ncclNumOps) == hocclNumOps &&
                  static_cast<long long>(ncclMaxRedOp) == static_cast<long long>(hocclMaxRedOp),
              "redop values");
static_assert(static_cast<int>(ncclInt8) == hocclInt8 && static_cast<int>(ncclUint8) == hocclUint8 &&
                  static_cast<int>(ncclInt32) == hocclInt32 && static_cast<int>(ncclUint32) == hocclUint32 &&
                  static_cast<int>(ncclInt64) == hocclInt64 && static_cast<int>(ncclUint64) == hocclUint64 &&
                  static_cast<int>(ncclFloat16) == hocclFloat16 && static_cast<int>(ncclFloat32) == hocclFloat32 &&
                  static_cast<int>(ncclFloat64) == hocclFloat64 && static_cast<int>(ncclBfloat16) == hocclBfloat16 &&
                  static_cast<int>(ncclFloat8e4m3) == hocclFloat8e4m3 &&
                  static_cast<int>(ncclFloat8e5m2) == hocclFloat8e5m2 &&
                  static_cast<int>(ncclNumTypes) == hocclNumTypes,
              "datatype values");
static_assert(static_cast<int>(ncclScalarDevice) == hocclScalarDevice &&
                  static_cast<int>(ncclScalarHostImmediate) == hocclScalarHostImmediate,
              "scalar residence values");
static_assert(HOCCL_NCCL_CONFIG_MAGIC == HOCCL_CONFIG_MAGIC, "config magic");

namespace hoccl::shim {
namespace {

thread_local std::string tlsLastError;

// Runs before any other constructor of the library: from here on hoccl also reads NCCL_<NAME> for every parameter
// (HOCCL_<NAME> wins when both are set), and logging picks up NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE.
__attribute__((constructor(101))) void enableNcclEnvironment() noexcept {
  try {
    params::enableNcclNames();
    log::resetFromEnvironment();
  } catch (...) {
    // A malformed variable must not kill the process at load time; it is reported again where it is used.
  }
}

}  // namespace

void setLastError(const std::string& msg) {
  tlsLastError = msg;
  HOCCL_WARN(kCall, "{}", msg);
}

const char* lastError() { return tlsLastError.c_str(); }

ncclResult_t fromHoccl(hocclResult_t result, hocclComm_t comm) {
  if (result != hocclSuccess && result != hocclInProgress) {
    const char* text = hocclGetLastError(comm);
    tlsLastError = (text && *text) ? text : hocclGetErrorString(result);
    // A wait that gave up after HOCCL_TIMEOUT / NCCL_TIMEOUT (hocclTimeout) is NCCL 2.32's ncclTimeout.
    if (result == hocclTimeout) HOCCL_WARN(kCall, "ncclTimeout: {}", tlsLastError);
  }
  return static_cast<ncclResult_t>(result);
}

void requireUsableBuffer(const char* what, const void* ptr) {
  if (!ptr || device::current()) return;  // with a device, kernels::classify decides and hoccl checks the call
  if (cuda::classify(ptr) != cuda::PtrKind::Device) return;
  throw Error(hocclInvalidArgument,
              fmt::format("{} ({}) is CUDA device memory, but hoccl uses no device in this process (HOCCL_DEVICE=none, "
                          "or the CUDA device could not be opened: HOCCL_DEBUG=INFO says why), so this libnccl.so.2 "
                          "can move host memory only. Pass host buffers (pageable, pinned or managed), or unset "
                          "HOCCL_DEVICE.",
                          what, ptr));
}

void requireHostBuffer(const char* what, const void* ptr) {
  if (!ptr || kernels::classify(ptr) != kernels::MemoryKind::Device) return;
  throw Error(hocclInvalidArgument,
              fmt::format("{} ({}) is device memory, but hoccl runs this call on host memory only. Pass host memory "
                          "(pageable, pinned or managed).",
                          what, ptr));
}

void syncStream(cudaStream_t stream) {
  device::refuseCapture(stream);
  if (!stream) return;
  if (device::Device* d = device::current()) {
    if (!d->validStream(stream))
      throw Error(hocclInvalidArgument, fmt::format("stream {} is not a live stream of {}; pass a valid stream or a "
                                                    "null stream",
                                                    static_cast<void*>(stream), d->name()));
    try {
      d->synchronize(stream);
    } catch (const Error& e) {
      throw Error(hocclInvalidArgument,
                  fmt::format("could not order the host-memory operation after stream {}: {}. Pass a valid stream "
                              "or a null stream.",
                              static_cast<void*>(stream), e.what()));
    }
    return;
  }
  if (!cuda::driverLoaded()) {
    throw Error(hocclInvalidArgument,
                fmt::format("a non-null stream ({}) was given, but no CUDA driver (libcuda.so.1) can be loaded in "
                            "this process. With host memory pass a null stream.",
                            static_cast<void*>(stream)));
  }
  const std::string failure = cuda::streamSynchronize(stream);
  if (!failure.empty()) {
    throw Error(hocclInvalidArgument,
                fmt::format("could not order the host-memory operation after stream {}: {}. Pass a valid stream "
                            "or a null stream.",
                            static_cast<void*>(stream), failure));
  }
}

hocclStream_t streamForCall(const void* sendbuff, const void* recvbuff, cudaStream_t stream) {
  const bool sendDev = sendbuff && kernels::classify(sendbuff) == kernels::MemoryKind::Device;
  const bool recvDev = recvbuff && kernels::classify(recvbuff) == kernels::MemoryKind::Device;
  if (!sendDev && !recvDev) {
    syncStream(stream);
    return nullptr;
  }
  const bool sendHost = sendbuff && !sendDev, recvHost = recvbuff && !recvDev;
  if (sendHost || recvHost) syncStream(stream);
  return reinterpret_cast<hocclStream_t>(stream);
}

void unsupported(const std::string& why) {
  throw Error(hocclInvalidUsage, "not supported by hoccl's libnccl.so.2: " + why);
}

}  // namespace hoccl::shim
