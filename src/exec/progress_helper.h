/// @file progress_helper.h
/// Keeps a step's transfers moving while the executor's thread runs a schedule's callback prim (the caller's
/// compute of the overlapped collectives): a helper thread drives the channels, the callback runs on the calling
/// thread, and the channels go back to the calling thread when it returns. Channels are driven by one thread at a
/// time (transport.h): the hand-over is a join, so the helper's last touch happens before the executor's next.
#pragma once

#include <exception>
#include <vector>

#include "base/health.h"
#include "transports/transport.h"

namespace hoccl::exec {

/// Runs `body` on this thread while a helper thread calls progress() on `channels` until none has pending work, the
/// body returns, or `health` says the communicator failed or was aborted. Returns what the helper caught (a peer's
/// failure) as an exception_ptr (null when none), for the caller to rethrow with its context; an exception of body
/// propagates after the helper stopped. Without pending work no thread is started.
std::exception_ptr runWhileProgressing(const std::vector<transport::Channel*>& channels, const Health& health,
                                       const std::function<void()>& body);

/// The communicator whose callback runs on this thread right now (null when none): hoccl calls on it are refused
/// (comm/group.cc), since its channels belong to the running operation.
const void* callbackOwner();

/// Marks this thread as running a callback of `comm` for its lifetime.
class CallbackScope {
 public:
  /// Enters (comm: the communicator, as an opaque key).
  explicit CallbackScope(const void* comm);
  /// Leaves.
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  const void* previous_;
};

}  // namespace hoccl::exec
