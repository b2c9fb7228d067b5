/// @file wait.h
/// How every hoccl wait behaves while a peer is late (the executor, the shm shortcuts, the topology probe): spin
/// first (with a core per rank the peer is nanoseconds away), then yield the core, then block (on a channel that
/// can wake the thread, else in short naps). With more ranks than cores on the host the peer we wait for may need
/// this core, so a wait yields almost at once and keeps yielding, like MPI's yield-when-idle. Also: the one message
/// for a wait that gave up.
#pragma once

#include <sched.h>

#include <chrono>
#include <string>
#include <thread>

namespace hoccl {

/// What a waiting thread should do after one more fruitless poll.
enum class WaitAction {
  Spin,   ///< poll again at once (after a pause instruction)
  Yield,  ///< give the core away once, then poll again
  Block,  ///< sleep until something may have changed (blockMicros()), then poll again
};

/// The waiting policy: counts fruitless polls and says what to do next. One per wait; reset() after progress.
class Backoff {
 public:
  /// `oversubscribed`: this host runs more ranks of the communicator than it has cores.
  explicit Backoff(bool oversubscribed) : oversubscribed_(oversubscribed) {}
  /// Progress was made: the next wait starts by spinning again.
  void reset() { idle_ = 0; }
  /// Fruitless polls since the last reset().
  unsigned idle() const { return idle_; }
  /// Counts one fruitless poll and says what to do.
  WaitAction next() {
    const unsigned i = idle_++;
    if (oversubscribed_)
      return i < kSpinOversubscribed    ? WaitAction::Spin
             : i < kYieldOversubscribed ? WaitAction::Yield
                                        : WaitAction::Block;
    return i < kSpin ? WaitAction::Spin : i < kYield ? WaitAction::Yield : WaitAction::Block;
  }
  /// How long a Block lasts: short at first, longer once the wait has gone on.
  int blockMicros() const { return idle_ < kYield + 2000 ? 50 : 200; }
  /// Counts one fruitless poll and carries out the action for a wait with nothing to block on (a nap).
  void pause() {
    switch (next()) {
      case WaitAction::Spin: cpuRelax(); break;
      case WaitAction::Yield: sched_yield(); break;
      case WaitAction::Block: std::this_thread::sleep_for(std::chrono::microseconds(blockMicros())); break;
    }
  }
  /// The processor's spin-wait hint.
  static void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

 private:
  static constexpr unsigned kSpin = 1u << 14;   // about a millisecond of polling
  static constexpr unsigned kYield = 1u << 17;  // then yield for a while
  static constexpr unsigned kSpinOversubscribed = 4;
  static constexpr unsigned kYieldOversubscribed = 1u << 17;
  bool oversubscribed_;
  unsigned idle_ = 0;
};

/// The message of a wait that gave up after `seconds`: "<who>: <what> made no progress for N s, waiting for
/// <peers>. That peer is stuck, dead or calling a different operation; ..." (thrown as hocclTimeout).
inline std::string silentPeerMessage(const std::string& who, const std::string& what, long long seconds,
                                     const std::string& peers) {
  return who + ": " + what + " made no progress for " + std::to_string(seconds) + " s, waiting for " + peers +
         ". That peer is stuck, dead or calling a different operation; check its log (HOCCL_DEBUG=INFO). Raise "
         "HOCCL_TIMEOUT if it is only slow.";
}

}  // namespace hoccl
