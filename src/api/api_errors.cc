// Error strings, the last-error text, and the checks every call makes on its communicator.
#include <mutex>

#include "api/guard.h"
#include "base/log.h"

namespace hoccl::api {
namespace {

thread_local std::string threadLastError;
std::mutex globalMutex;
std::string globalLastError;

}  // namespace

void setLastError(const std::string& text) {
  threadLastError = text;
  std::lock_guard<std::mutex> lock(globalMutex);
  globalLastError = text;
  HOCCL_INFO(kCall, "{}", text);
}

void clearLastError() { threadLastError.clear(); }

Communicator& liveComm(hocclComm_t comm, bool allowFailed) {
  if (!comm) throwInvalidArgument("comm is NULL: create it with hocclCommInitRank first");
  unsigned stamp = comm->stamp.load();
  if (stamp == hocclComm::kDead) throwInvalidUsage("comm was already destroyed or aborted (use after destroy)");
  if (stamp != hocclComm::kAlive)
    throwInvalidArgument("comm is not a hoccl communicator (corrupted or foreign handle)");
  int init = comm->initResult.load();
  if (init == hocclInProgress)
    throw Error(hocclInvalidUsage,
                "comm is still initializing (non-blocking init): poll hocclCommGetAsyncError "
                "until it returns hocclSuccess");
  if (init != hocclSuccess)
    throw Error(static_cast<hocclResult_t>(init), "comm failed to initialize: " + comm->initError);
  int pending = comm->pending.load();
  if (pending == hocclInProgress)
    throw Error(hocclInvalidUsage,
                "comm has a non-blocking hocclCommSplit or hocclCommFinalize in progress: poll "
                "hocclCommGetAsyncError until it leaves hocclInProgress");
  if (pending != hocclSuccess && !allowFailed)
    throw Error(static_cast<hocclResult_t>(pending),
                "a non-blocking hocclCommSplit / hocclCommFinalize of comm failed: " + comm->pendingError);
  Communicator& c = *comm->impl;
  int err = c.asyncError.load();
  if (!allowFailed && err != hocclSuccess)
    throw Error(static_cast<hocclResult_t>(err), c.describe() +
                                                     " failed in an earlier operation and cannot be used "
                                                     "any more; destroy or abort it and create a new one");
  return c;
}

}  // namespace hoccl::api

extern "C" {

const char* hocclGetErrorString(hocclResult_t result) {
  switch (result) {
    case hocclSuccess: return "no error";
    case hocclUnhandledCudaError: return "unhandled cuda error (run with HOCCL_DEBUG=INFO for details)";
    case hocclSystemError: return "unhandled system error (run with HOCCL_DEBUG=INFO for details)";
    case hocclInternalError: return "internal error - please report this issue to the hoccl developers";
    case hocclInvalidArgument: return "invalid argument (run with HOCCL_DEBUG=WARN for details)";
    case hocclInvalidUsage: return "invalid usage (run with HOCCL_DEBUG=WARN for details)";
    case hocclRemoteError: return "remote process exited or there was a network error";
    case hocclInProgress: return "hoccl operation in progress";
    case hocclTimeout:
      return "timeout: a peer did not answer within HOCCL_TIMEOUT (run with HOCCL_DEBUG=WARN for details)";
    default: return "unknown result code";
  }
}

const char* hocclGetLastError(hocclComm_t) {
  using namespace hoccl::api;
  if (!threadLastError.empty()) return threadLastError.c_str();
  std::lock_guard<std::mutex> lock(globalMutex);
  thread_local std::string copy;
  copy = globalLastError;
  return copy.c_str();
}

}  // extern "C"
