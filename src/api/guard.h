/// @file guard.h
/// The C edge: every exported function runs its body through guarded(), which turns hoccl::Error (and anything
/// else) into a result code and the text hocclGetLastError returns. No exception ever crosses extern "C".
#pragma once

#include <new>
#include <string>

#include "comm/communicator.h"
#include "base/error.h"

namespace hoccl::api {

/// Records the last error text (this thread's and the process's).
void setLastError(const std::string& text);
/// Clears this thread's last error.
void clearLastError();

/// Runs body; returns hocclSuccess or the error's code, recording "<function>: <message>".
template <class Body>
hocclResult_t guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const Error& e) {
    setLastError(std::string(function) + ": " + e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    setLastError(std::string(function) + ": out of memory");
    return hocclSystemError;
  } catch (const std::exception& e) {
    setLastError(std::string(function) + ": internal error: " + e.what());
    return hocclInternalError;
  } catch (...) {
    setLastError(std::string(function) + ": internal error (unknown exception)");
    return hocclInternalError;
  }
}

/// The live communicator behind a handle; throws a precise error for NULL, destroyed, still-initializing or
/// failed communicators.
Communicator& liveComm(hocclComm_t comm, bool allowFailed = false);

}  // namespace hoccl::api
