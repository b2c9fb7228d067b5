/// @file shim_common.h
/// What every file of the NCCL shim shares: the guard that turns any failure into an ncclResult_t plus a
/// ncclGetLastError text, handle and enum conversions to hoccl's C API, buffer and stream checks, and the
/// macro that makes the weak nccl* alias of a strong pnccl* function.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <utility>

#include "base/error.h"
#include "hoccl/hoccl.h"
#include "shim/nccl_abi.h"

/// Declares the weak NAME as an alias of the strong pNAME defined just above it in the same file (NCCL's
/// profiling-interface pattern: a tool may define NAME itself and call pNAME).
#define HOCCL_NCCL_WEAK_ALIAS(NAME) extern "C" decltype(::p##NAME) NAME __attribute__((weak, alias("p" #NAME)));

namespace hoccl::shim {

/// Records msg as this thread's ncclGetLastError text.
void setLastError(const std::string& msg);
/// This thread's last error text ("" if none).
const char* lastError();

/// Turns a hoccl result into NCCL's; on failure copies hoccl's last-error text for comm into ours.
ncclResult_t fromHoccl(hocclResult_t result, hocclComm_t comm = nullptr);

/// Runs body (which returns ncclResult_t) and turns any exception into a result code and a last-error text that
/// starts with fn. Nothing escapes: the shim's functions are called from C.
template <class Body>
ncclResult_t guarded(const char* fn, Body&& body) noexcept {
  try {
    return std::forward<Body>(body)();
  } catch (const Error& e) {
    setLastError(std::string(fn) + ": " + e.what());
    return static_cast<ncclResult_t>(e.code());
  } catch (const std::bad_alloc&) {
    setLastError(std::string(fn) + ": out of host memory");
    return ncclSystemError;
  } catch (const std::exception& e) {
    setLastError(std::string(fn) + ": internal error: " + e.what());
    return ncclInternalError;
  } catch (...) {
    setLastError(std::string(fn) + ": internal error (unknown exception)");
    return ncclInternalError;
  }
}

/// The hoccl handle behind an NCCL handle (the shim hands out hoccl's handles unchanged).
inline hocclComm_t toHoccl(ncclComm_t comm) { return reinterpret_cast<hocclComm_t>(comm); }
/// The NCCL handle of a hoccl handle.
inline ncclComm_t toNccl(hocclComm_t comm) { return reinterpret_cast<ncclComm_t>(comm); }
/// Same values by contract (asserted in shim_common.cc).
inline hocclDataType_t toHoccl(ncclDataType_t t) { return static_cast<hocclDataType_t>(t); }
/// Same values by contract; dynamic (PreMulSum) ops pass unchanged.
inline hocclRedOp_t toHoccl(ncclRedOp_t op) { return static_cast<hocclRedOp_t>(op); }

/// Throws InvalidArgument if ptr is device memory but hoccl uses no device in this process (HOCCL_DEVICE=none, or the
/// CUDA device could not be opened), so hoccl cannot move it. `what` names the argument. Device memory of the
/// process's device (a GPU, or the simulated one) passes: hoccl's device path takes it.
/// Error texts thrown here and below leave out the function name: guarded() puts it in front.
void requireUsableBuffer(const char* what, const void* ptr);
/// Throws InvalidArgument if ptr is device memory, for the calls hoccl runs on host memory only (one-sided puts,
/// buffer registration).
void requireHostBuffer(const char* what, const void* ptr);
/// Orders a host-memory operation after the work already queued on stream: synchronises a non-null stream through
/// the process's device (a GPU or the simulated one), else through the CUDA driver; throws InvalidArgument when the
/// stream is not a live stream, or when a non-null stream is given and there is neither a device nor a driver.
void syncStream(cudaStream_t stream);
/// The stream to hand to hoccl for a call on these buffers (checked with requireUsableBuffer first), as NCCL orders
/// it: device buffers (either one) make the call stream-ordered on `stream` (hoccl enqueues it and returns); host
/// buffers only run at once after the stream's earlier work (syncStream) with a null stream. When one buffer is on
/// the device and the other on the host the stream is synchronised too and passed on: hoccl then either refuses the
/// mix or (when the host one is a buffer the rank does not use) runs the call stream-ordered.
hocclStream_t streamForCall(const void* sendbuff, const void* recvbuff, cudaStream_t stream);
/// Throws InvalidUsage saying that the call is not supported by hoccl; `why` says why and what to do instead.
[[noreturn]] void unsupported(const std::string& why);

/// Forgets the buffer and window registrations of comm (called when it is destroyed or aborted; shim_mem.cc).
void dropRegistrations(ncclComm_t comm);

/// A window made by ncclCommWindowRegister, as the shim recorded it (shim_mem.cc).
struct WindowInfo {
  ncclComm_t comm;      ///< the communicator it was registered with
  void* base;           ///< the caller's buffer
  size_t bytes;         ///< its size
  hocclWindow_t hoccl;  ///< the communicator's window (hocclCommWindowRegister)
};
/// The window behind win; throws InvalidArgument when win is not a live window of this process.
WindowInfo windowInfo(ncclWindow_t win);

/// Throws InvalidUsage when comm is suspended (ncclCommSuspend without ncclCommResume yet; shim_comm_ext.cc).
void requireNotSuspended(ncclComm_t comm);
/// Forgets the suspension and grow state of comm (called when it is destroyed or aborted; shim_comm_ext.cc).
void dropCommState(ncclComm_t comm);

}  // namespace hoccl::shim
