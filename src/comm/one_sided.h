/// @file one_sided.h
/// One-sided puts and signals between the ranks of one host (hocclPutSignal, hocclSignal, hocclWaitSignal, and the
/// NCCL shim's ncclPutSignal/ncclSignal/ncclWaitSignal), over host memory that the ranks map from each other:
///
///   windows   hocclCommWindowRegister is collective: every rank publishes (over the bootstrap) the size of its part,
///             its address and, when the part is memory of hocclMemAlloc, the shared block it lies in. A put checks
///             offset + bytes against the target's published size before anything is written, then copies straight
///             into the target's part through a mapping of its block (made on first use, kept with the window).
///   signals   with the first window, each rank allocates one shared block of counters, one 64-bit counter per
///             (context, signal index, sender), and publishes it with its window. A signal is an atomic add (release)
///             of one to the target's counter for this rank; a put's signal follows its copy, so a waiter that sees the
///             count sees the data.
///   waits     a rank remembers how many signals of each counter it consumed; a wait polls (acquire) until every
///             descriptor's counter reaches consumed + opCnt, then consumes them. The poll follows base/wait.h: it
///             checks the communicator's health (abort, the job's verdict), whether the waited peers' processes still
///             run, and HOCCL_TIMEOUT (hocclTimeout naming the peers and the counts that are missing).
///
/// Ranks on other hosts cannot be served (there is no memory to write into) and are refused with hocclInvalidUsage,
/// as are puts into a part that is not memory of hocclMemAlloc. One thread drives a communicator at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hoccl/hoccl.h"
#include "kernels/shared_mem.h"

namespace hoccl {

class Communicator;

/// The windows and signals of one communicator.
class OneSided {
 public:
  /// For comm (kept by reference: it owns this object).
  explicit OneSided(Communicator& comm);
  ~OneSided();
  OneSided(const OneSided&) = delete;
  OneSided& operator=(const OneSided&) = delete;

  /// Collective: registers this rank's [base, base+bytes) as its part of a new window; returns the window's handle.
  /// Throws on every rank when any rank's part is refused (that rank with its own reason).
  hocclWindow_t registerWindow(void* base, size_t bytes);
  /// Removes a window of registerWindow (local). Throws hocclInvalidArgument for an unknown handle.
  void deregisterWindow(hocclWindow_t win);
  /// Copies `bytes` from src into peer's part of win at `offset`, then signals (sigIdx, ctx) to peer.
  void putSignal(const void* src, size_t bytes, int peer, hocclWindow_t win, size_t offset, int sigIdx, int ctx,
                 unsigned flags);
  /// Signals (sigIdx, ctx) to peer.
  void signal(int peer, int sigIdx, int ctx, unsigned flags);
  /// Waits for and consumes the signals of descs (see the file comment).
  void wait(int n, const hocclWaitSignalDesc_t* descs);

 private:
  /// What a rank publishes when a window is registered (the bootstrap carries it; all ranks share one layout).
  struct Card {
    uint64_t bytes = 0;           ///< size of its part
    uint64_t address = 0;         ///< its part's address in its process
    kernels::SharedRef part;      ///< the shared block of its part (fd -1: not shared memory)
    kernels::SharedRef signals;   ///< its block of signal counters
    uint64_t signalsAddress = 0;  ///< their address in its process
    int32_t pid = 0;              ///< its process
    int32_t ok = 0;               ///< 1: its part was accepted
  };
  /// A window: every rank's card and, per peer, the mapping of its block (null until the first put).
  struct Window {
    void* base = nullptr;
    size_t bytes = 0;
    void* registration = nullptr;  ///< the Registrations entry of the part
    std::vector<Card> cards;
    std::vector<void*> mapped;  ///< by rank: mapping of its block (whole file), null until used
  };
  /// Where a rank's signal counters lie, as it published them.
  struct SignalRef {
    kernels::SharedRef block;  ///< the shared block (fd -1: not known yet)
    uint64_t address = 0;      ///< its address in the rank's process
    int32_t pid = 0;           ///< the rank's process
  };
  /// A peer's counters as this process sees them.
  struct PeerSignals {
    SignalRef ref;             ///< as the peer published it
    void* mapping = nullptr;   ///< mapping of its block (whole file) when it lives in another process
    uint64_t* base = nullptr;  ///< its counters in this process, null until used
  };

  Window& windowOf(hocclWindow_t win, const char* what);
  void checkSignal(const char* what, int peer, int sigIdx, int ctx, unsigned flags) const;
  void requireSameHost(const char* what, int peer) const;
  uint64_t* counter(int owner, int sender, int sigIdx, int ctx);
  void bump(int peer, int sigIdx, int ctx);
  std::string describeRank(int r) const;
  std::string who() const;

  Communicator& comm_;
  int rank_;
  int nranks_;
  void* signalBlock_ = nullptr;           ///< this rank's counters (sharedAlloc), made with the first window
  std::vector<PeerSignals> peerSignals_;  ///< by rank
  std::vector<uint64_t> consumed_;        ///< by (ctx, sigIdx, sender): signals consumed by waits
  std::map<hocclWindow_t, std::unique_ptr<Window>> windows_;
};

}  // namespace hoccl
