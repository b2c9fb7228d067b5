/// @file spin_lock.h
/// A lock for data that one thread updates on every call and another reads now and then (the flight recorder's
/// ring): taking and releasing it uncontended is one atomic exchange and one store, where a std::mutex pair costs two
/// locked instructions and two calls into the C library. A waiter spins a while, then yields the core; hold it only
/// for a few microseconds.
#pragma once

#include <sched.h>

#include <atomic>

#include "base/wait.h"

namespace hoccl {

/// See the file comment. Meets BasicLockable, for std::lock_guard.
class SpinLock {
 public:
  /// Takes the lock.
  void lock() {
    for (unsigned tries = 0; locked_.exchange(true, std::memory_order_acquire); ++tries) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++tries < kSpins) Backoff::cpuRelax();
        else sched_yield();
      }
    }
  }
  /// Releases the lock.
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned kSpins = 1024;  // then yield: the holder may be waiting for this core
  std::atomic<bool> locked_{false};
};

}  // namespace hoccl
