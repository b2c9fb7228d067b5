/// @file error.h
/// The one error type used inside hoccl. Thrown inside, turned into hocclResult_t at the C edge (src/api).
#pragma once

#include <stdexcept>
#include <string>

#include "hoccl/hoccl.h"

namespace hoccl {

/// An error with the C result code that the API edge returns and a message for a person at 3 a.m.
/// The message says what failed, on which rank, with which peer, and what to try.
class Error : public std::runtime_error {
 public:
  /// Creates an error with code and full message.
  Error(hocclResult_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  /// The C result code.
  hocclResult_t code() const { return code_; }

 private:
  hocclResult_t code_;
};

/// Throws hocclInvalidArgument with msg.
[[noreturn]] inline void throwInvalidArgument(const std::string& msg) { throw Error(hocclInvalidArgument, msg); }
/// Throws hocclInvalidUsage with msg.
[[noreturn]] inline void throwInvalidUsage(const std::string& msg) { throw Error(hocclInvalidUsage, msg); }
/// Throws hocclSystemError with msg and the text of errno value err.
[[noreturn]] void throwSystemError(const std::string& msg, int err);
/// Throws hocclRemoteError with msg.
[[noreturn]] inline void throwRemoteError(const std::string& msg) { throw Error(hocclRemoteError, msg); }
/// Throws hocclInternalError with msg.
[[noreturn]] inline void throwInternalError(const std::string& msg) { throw Error(hocclInternalError, msg); }

}  // namespace hoccl
