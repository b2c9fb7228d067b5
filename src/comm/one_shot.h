/// @file one_shot.h
/// The host side of the one-kernel all-reduce (kernels/device/one_shot_phases.h has the kernel and its algorithm):
/// small all-reduces on device buffers of the ranks of one host, launched straight onto the caller's stream, with no
/// proxy thread in between (comm/group.h hands such calls here, through the proxy, which keeps the order).
///
/// - Set up at init, collectively (every rank of a communicator with the shm session's shortcuts and 2-8 ranks, all of
///   which want it in their RankInfo, takes part, whatever its own device says): a rank that wants the path (HOCCL_DEVICE_ONE_SHOT) allocates its area of device
///   memory and pinned host words (an abort word, a ring of status slots), and exports the area; the ranks all-gather
///   what they offer, map every peer's area and all-gather whether that worked (and whether the devices reach each
///   other). The path runs only when every rank says yes, so every rank decides alike.
/// - A call takes the path when it is one all-reduce (alone, or alone in a group) of 1 to 64 KiB on device buffers with
///   a built-in op (Avg: the sum, then the device's division) and the mismatch check does not want it
///   (comm/call_check.h): the kernel compares every call's descriptor with every peer's, so every call on the path is
///   checked anyway. The ranks' choice is the same for the same call; a rank whose call differs meets the others'
///   descriptors (a mismatch on every rank) or, on host buffers, their notes on the call board.
/// - Order: the launches of a communicator follow each other (each waits for the previous one's event), after the
///   proxy's earlier submissions, and before its later ones (Proxy orders both ways).
/// - Failures: each launch has a slot of status words in pinned host memory (a ring of kRing); poll() reads the slots
///   of finished launches and keeps the first failure (a timeout, a mismatch, a failed peer, an abort): it is the
///   communicator's async error, and every later call fails with it. The communicator's health is mirrored into the
///   abort word, so a verdict of the bootstrap (a dead peer) or hocclCommAbort stops a waiting kernel at once; the
///   proxy's thread, idle meanwhile, watches the peers' processes (watch()) and reports a dead one to the root.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/group.h"
#include "kernels/device/device.h"
#include "kernels/device/one_shot_phases.h"

namespace hoccl {

class Communicator;

/// See the file comment. Made by setUp at init; thread-safe (the caller's thread launches, any thread may poll).
class OneShotAllReduce {
 public:
  /// Launches in flight at most (their status slots).
  static constexpr size_t kRing = 1024;

  /// Whether this rank wants the path: HOCCL_DEVICE_ONE_SHOT 1, or 2 (auto) with HOCCL_DEVICE=sim (the variable, not
  /// the device, so that asking creates no CUDA context). Every rank tells the others in its RankInfo.
  static bool wanted();
  /// Collective at init (see the file comment): the path of comm, or null when any rank does not take it. When a
  /// rank's RankInfo says it does not want it, no rank runs a round.
  static std::unique_ptr<OneShotAllReduce> setUp(Communicator& comm);
  /// Stops waiting kernels (the abort word), waits (bounded) for the peers to be done with this rank's area, unmaps
  /// the peers' areas and frees this rank's.
  ~OneShotAllReduce();
  OneShotAllReduce(const OneShotAllReduce&) = delete;
  OneShotAllReduce& operator=(const OneShotAllReduce&) = delete;

  /// Whether op (numbered: Op::seq) runs on this path.
  bool takes(const Op& op) const;
  /// Enqueues op on its stream (after this communicator's earlier launches); returns at once.
  void launch(const Op& op);
  /// Makes work queued on stream from now on wait for every launch so far.
  void orderBefore(device::Stream stream);
  /// Waits until every launch so far has run (bounded by HOCCL_TIMEOUT; a failed or aborted communicator stops the
  /// kernels through the abort word), then polls.
  void drain();
  /// Reads the status of finished launches; returns the first failure's message ("" while none).
  std::string poll();
  /// For the proxy's thread, every few tens of milliseconds while it is idle: polls, and when a launch has not run
  /// yet and a peer's process is gone, reports that peer to the bootstrap root (once), whose verdict stops the waiting
  /// kernels through the abort word (a kernel cannot see a dead process; nobody else waits for it on this rank).
  /// Returns whether a launch is still pending.
  bool watch();
  /// The process's count of launches on the path (tests assert that it ran).
  static std::atomic<uint64_t>& launches();

 private:
  struct Launch {  // what a status slot's message needs
    uint64_t epoch = 0;
    uint64_t seq = 0;
    uint64_t traceId = 0;
    uint64_t call = 0;  // its descriptor
    size_t count = 0;
    hocclDataType_t dtype = hocclFloat;
    hocclRedOp_t op = hocclSum;
  };
  OneShotAllReduce(Communicator& comm, device::Device& dev);
  std::string pollLocked();  // poll() with mu_ held
  std::string describeFailure(const Launch& l, const uint32_t* status) const;
  void release();

  Communicator& comm_;
  device::Device& dev_;
  char* area_ = nullptr;          // this rank's area (device memory)
  std::vector<char*> areas_;      // every rank's (the peers' mapped here)
  uint32_t* words_ = nullptr;     // pinned: the abort word, then kRing status slots
  device::Event last_ = nullptr;  // recorded after the latest launch
  std::mutex mu_;
  uint64_t epoch_ = 0;        // launches so far
  uint64_t polled_ = 0;       // launches whose status was read
  std::vector<Launch> ring_;  // by epoch % kRing
  std::string failure_;       // the first failure
  bool reported_ = false;     // watch() reported a dead peer
  uint64_t timeoutNs_ = 0;
};

/// Packs what a call is into the kernel's 64-bit descriptor: its call tag (comm/plan.h: callTagOf) and the type and
/// op; every rank of the same call gets the same.
uint64_t oneShotDescriptor(const Op& op);

}  // namespace hoccl
