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
  /// Creates an error with code and full message. `mismatch`: the ranks of the communicator no longer agree on where
  /// they are (a mismatch of calls), so it cannot be used any more even though the code is a usage error. An error
  /// re-thrown with more context passes on isMismatch(), not breaksCommunicator() (the code says the rest).
  Error(hocclResult_t code, const std::string& message, bool mismatch = false)
      : std::runtime_error(message), code_(code), mismatch_(mismatch) {}
  /// The C result code.
  hocclResult_t code() const { return code_; }
  /// True for a mismatch of calls between ranks (throwMismatch).
  bool isMismatch() const { return mismatch_; }
  /// True when the communicator cannot be used after this error: a transport, system or internal failure, a timeout, or a
  /// mismatch of calls between ranks.
  bool breaksCommunicator() const {
    return mismatch_ || code_ == hocclRemoteError || code_ == hocclTimeout || code_ == hocclSystemError ||
           code_ == hocclInternalError;
  }

 private:
  hocclResult_t code_;
  bool mismatch_;
};

/// Throws hocclInvalidArgument with msg.
[[noreturn]] inline void throwInvalidArgument(const std::string& msg) { throw Error(hocclInvalidArgument, msg); }
/// Throws hocclInvalidUsage with msg.
[[noreturn]] inline void throwInvalidUsage(const std::string& msg) { throw Error(hocclInvalidUsage, msg); }
/// Throws hocclSystemError with msg and the text of errno value err.
[[noreturn]] void throwSystemError(const std::string& msg, int err);
/// Throws hocclInvalidUsage with msg for ranks whose calls do not match: the communicator is broken (every rank
/// learns it through the bootstrap's failure verdict).
[[noreturn]] inline void throwMismatch(const std::string& msg) { throw Error(hocclInvalidUsage, msg, true); }
/// Throws hocclRemoteError with msg.
[[noreturn]] inline void throwRemoteError(const std::string& msg) { throw Error(hocclRemoteError, msg); }
/// Throws hocclTimeout with msg: a wait gave up because HOCCL_TIMEOUT passed (a dead peer is hocclRemoteError).
[[noreturn]] inline void throwTimeout(const std::string& msg) { throw Error(hocclTimeout, msg); }
/// Throws hocclInternalError with msg.
[[noreturn]] inline void throwInternalError(const std::string& msg) { throw Error(hocclInternalError, msg); }

}  // namespace hoccl
