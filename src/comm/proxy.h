/// @file proxy.h
/// The communicator's proxy: runs the stream-ordered operations (those on device buffers) on a thread of its own, so
/// that the call enqueues and returns without waiting for peers. For each submission it records an event on every
/// caller's stream, waits for the event (the work queued before the call has run), runs the operations with the
/// device's MemoryOps on its internal stream, and then releases the callers' streams, which were told at submission
/// to wait until a flag reaches the submission's ticket. A failure is kept: it is the communicator's async error,
/// reported by hocclCommGetAsyncError and by the next call; the streams are released all the same, never left
/// hanging. Every wait follows base/wait.h (HOCCL_TIMEOUT, the communicator's health).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/group.h"
#include "kernels/device/device.h"

namespace hoccl {

/// See the file comment. One per communicator, made on its first stream-ordered call.
class Proxy {
 public:
  /// Starts the proxy thread of comm on dev.
  Proxy(Communicator& comm, device::Device& dev);
  /// Runs what was submitted (bounded by the waits' timeouts), releases every stream, stops.
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  /// Enqueues ops (all of this communicator; each op's stream orders it) as one launch, and returns. They start after
  /// the communicator's one-kernel all-reduces launched so far (comm/one_shot.h).
  void submit(std::vector<Op> ops);
  /// Launches op on the communicator's one-kernel path (Communicator::oneShot(), which takes it) on its stream, after
  /// everything submitted here so far, and returns.
  void launchOneShot(const Op& op);
  /// Waits until everything submitted so far has run (or failed), one-kernel launches included.
  void drain();
  /// Throws the first failure of a submitted operation or a one-kernel launch, if any (the communicator is unusable
  /// after it).
  void throwIfFailed() const;
  /// The first failure's message, "" if none.
  std::string failure() const;

 private:
  struct Job {
    std::vector<Op> ops;
    std::vector<device::Event> events;  // one per distinct stream of ops, recorded at submission
    uint32_t ticket = 0;
  };
  void loop();
  void run(Job& job);
  void waitForEvents(const Job& job);
  void release(uint32_t ticket);

  Communicator& comm_;
  device::Device& dev_;
  device::Stream internal_ = nullptr;
  uint32_t* flag_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<Job> queue_;
  uint32_t submitted_ = 0, completed_ = 0;
  bool stop_ = false;
  std::string failure_;
  int failureCode_ = hocclSuccess;
  std::thread thread_;
};

}  // namespace hoccl
