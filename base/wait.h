/// @file wait.h
/// How every hoccl wait behaves while a peer is late (the executor, the shm shortcuts, the topology probe), and the
/// one message for a wait that gave up.
///
/// The policy. A wait polls; after each fruitless poll it spins (a pause instruction), yields the core, or blocks
/// (on a channel that can wake the thread, else a short nap). Which of the three, and for how long, depends on
/// whether the peer it waits for can run while this thread waits:
///  - Spin: the host has a core for every rank and no other work to speak of. The peer is running elsewhere and
///    answers within nanoseconds: spin about a millisecond, then yield for a while, then block.
///  - Share: the cores are contended: other jobs' threads (the host's run queue is longer than its free cores) or a
///    few ranks per core. The peer may need this very core: a few polls, a few yields, then block, so the scheduler
///    runs the peer and wakes this thread (a woken sleeper runs soon; a thread that spins or keeps yielding loses
///    that preference and takes time from the peer).
///  - Block: many ranks per core (more than 8: ranks as threads, 8-128 per process, on a few cores): a yield only
///    hands the core to another waiting rank, so block at once.
/// chooseWaitPolicy() makes the choice from HostLoad, which the communicator samples (src/comm/communicator.cc: the
/// ranks on this host, the cores this process may use, the host's runnable threads from /proc/loadavg, refreshed
/// at most every 100 ms, never per poll). HOCCL_WAIT_POLICY forces one.
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

/// How a wait spends its time (see the file comment).
enum class WaitPolicy {
  Spin,   ///< a core for every rank and room on the host: spin about a millisecond, yield a while, then block
  Share,  ///< the cores are contended: a few polls and yields, then block
  Block,  ///< many ranks per core: block almost at once
};

/// The name of `p` ("spin", "share", "block"), as HOCCL_WAIT_POLICY spells it.
inline const char* waitPolicyName(WaitPolicy p) {
  return p == WaitPolicy::Spin ? "spin" : p == WaitPolicy::Share ? "share" : "block";
}

/// The inputs of the policy, as the communicator sampled them.
struct HostLoad {
  int localRanks = 1;  ///< ranks of the communicator on this host (processes or threads)
  int cores = 1;       ///< CPUs this process may run on (its affinity mask)
  int hostCpus = 1;    ///< CPUs online on the host: the scope of `runnable`
  int runnable = -1;   ///< threads runnable on the host at the last sample (/proc/loadavg); -1 = unknown
};

/// The policy for `h` (base/wait.cc). Pure: the same inputs give the same answer.
///  - more than 8 ranks per core: Block (a yield would only hand the core to another waiting rank);
///  - more ranks than cores: Share;
///  - the host's runnable threads other than this communicator's ranks, plus its ranks, exceed the host's CPUs
///    (another job keeps cores busy): Share. The ranks count as runnable whether or not the sample caught them
///    running, so a sample taken while they spin does not count them twice;
///  - else Spin.
WaitPolicy chooseWaitPolicy(const HostLoad& h);

/// The runnable threads in the text of /proc/loadavg ("0.50 0.40 0.30 3/812 12345": the 3), or -1 when the text
/// does not have that shape.
int runnableFromLoadavg(const char* text);

/// The waiting policy of one wait: counts fruitless polls and says what to do next. reset() after progress.
class Backoff {
 public:
  /// A wait following `policy` (usually Communicator::waitPolicy()).
  explicit Backoff(WaitPolicy policy) : policy_(policy), limits_(limits(policy)) {}
  /// A wait with no communicator at hand: `oversubscribed` (more ranks than cores) picks Share, else Spin.
  explicit Backoff(bool oversubscribed) : Backoff(oversubscribed ? WaitPolicy::Share : WaitPolicy::Spin) {}
  /// Progress was made: the next wait starts by spinning again.
  void reset() { idle_ = 0; }
  /// Fruitless polls since the last reset().
  unsigned idle() const { return idle_; }
  /// The policy this wait follows.
  WaitPolicy policy() const { return policy_; }
  /// Counts one fruitless poll and says what to do.
  WaitAction next() {
    const unsigned i = idle_++;
    return i < limits_.spin ? WaitAction::Spin : i < limits_.yield ? WaitAction::Yield : WaitAction::Block;
  }
  /// How long a Block lasts: short at first, longer once the wait has gone on.
  int blockMicros() const { return idle_ < limits_.yield + 2000 ? 50 : 200; }
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

  /// Where each phase of a policy ends, in fruitless polls: Spin before `spin`, Yield before `yield`, then Block.
  struct Limits {
    unsigned spin;   ///< polls that spin
    unsigned yield;  ///< polls that spin or yield
  };
  /// The phases of `policy` (base/wait.cc).
  static Limits limits(WaitPolicy policy);

 private:
  WaitPolicy policy_;
  Limits limits_;
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
