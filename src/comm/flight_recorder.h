/// @file flight_recorder.h
/// The flight recorder: the last HOCCL_TRACE_SIZE operations of one communicator (sequence number, collective or
/// send/recv, count and bytes, type, op, root or peer, the algorithm or shortcut that ran it, its state, and when it
/// was enqueued, started and ended) in a ring buffer. With HOCCL_TRACE_DUMP set, every live recorder of the process
/// is written as JSON to that file when a call fails (an error, a timeout, a peer's failure) and when the process
/// receives SIGUSR1; `hoccl-trace` (tools/trace) reads the files of all ranks and says which rank is behind, on
/// which call, and which calls differ. Recording costs an uncontended spin-lock/unlock pair and a read of the coarse
/// real-time clock per operation, and as much again when it ends (times have the kernel tick's resolution, given in
/// the dump). A small call that runs start to end on the calling thread ends untimed (doneUntimed): one store.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/collective.h"
#include "base/spin_lock.h"
#include "hoccl/hoccl.h"

namespace hoccl {

/// Where an operation stands.
enum class TraceState : uint8_t {
  Enqueued,   ///< recorded inside a group, waiting for the outermost hocclGroupEnd
  Running,    ///< started
  Done,       ///< returned success
  Failed,     ///< returned an error
  Discarded,  ///< recorded in a group that was closed without running (ncclGroupSimulateEnd)
};

/// Name of a state ("enqueued", "running", "done", "failed", "discarded").
const char* traceStateName(TraceState s);

/// One recorded operation.
struct TraceEntry {
  /// What kind of operation.
  enum class Kind : uint8_t { Collective, Send, Recv } kind = Kind::Collective;
  uint64_t id = 0;                          ///< operations recorded on the communicator before this one
  int64_t seq = -1;                         ///< collective sequence number (the same on every rank); -1 for send/recv
  Coll coll = Coll::AllReduce;              ///< for collectives
  size_t count = 0;                         ///< elements as the C API takes them
  size_t bytes = 0;                         ///< bytes of the largest buffer of the operation on this rank
  hocclDataType_t dtype = hocclFloat;       ///< element type
  int op = -1;                              ///< reduction op of a reducing collective, else -1
  int root = -1;                            ///< root of a rooted collective, else -1
  int peer = -1;                            ///< peer of a send or receive, else -1
  const char* algorithm = nullptr;          ///< what ran it ("ring", "small", "p2p"); a string that lives forever
  TraceState state = TraceState::Enqueued;  ///< see TraceState
  int64_t enqueuedNs = 0;                   ///< wall-clock time (ns since the epoch) it was recorded
  int64_t startNs = 0;                      ///< ... it started (0 while enqueued)
  int64_t endNs = 0;                        ///< ... it ended (0 while enqueued or running)
};

/// The ring buffer of one communicator. Thread-safe: the thread driving the communicator records, a dump (a failing
/// call, the SIGUSR1 thread) reads.
class FlightRecorder {
 public:
  /// Keeps the last `capacity` operations, rounded up to a power of two (0: records nothing). `commId` is the same
  /// on every rank of the communicator; `name` is the user's name for it (may be empty). Registers itself for dumps.
  FlightRecorder(size_t capacity, std::string commId, std::string name, int rank, int nranks);
  /// Unregisters.
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  /// Records e (its id and enqueue time are set here) in state `state` (Enqueued or Running); returns its id.
  uint64_t record(const TraceEntry& e, TraceState state);
  /// Moves operation `id` to `state` (Running sets the start time, Done/Failed the end time) and, when given, sets
  /// what runs it and its sequence number (seq >= 0). Nothing happens when the entry has already been overwritten.
  void update(uint64_t id, TraceState state, const char* algorithm = nullptr, int64_t seq = -1);
  /// Moves operation `id` (Running) to Done without its end time (endNs stays 0) for the price of one store: no
  /// lock, no clock. For the small calls of the fast path (src/comm/group.cc), whose microseconds the tick-resolution
  /// clock cannot time anyway and which would otherwise pay the recorder more than their own work.
  void doneUntimed(uint64_t id) {
    if (!doneUntimed_.empty()) doneUntimed_[id & mask_].store(id + 1, std::memory_order_release);
  }
  /// The kept entries, oldest first.
  std::vector<TraceEntry> snapshot() const;
  /// Operations recorded so far (including overwritten ones).
  uint64_t total() const;
  /// This communicator as JSON text (an object; see docs/reliability.md for the fields).
  std::string toJson() const;
  /// Whether it records anything.
  bool enabled() const { return !ring_.empty(); }

  /// Writes every live recorder of the process to HOCCL_TRACE_DUMP (%r = `rank`, or the first recorder's rank when
  /// -1; %p = pid), with `reason`; returns the path written, "" when HOCCL_TRACE_DUMP is unset or the write failed
  /// (logged).
  static std::string dumpAll(const std::string& reason, int rank = -1);
  /// The path HOCCL_TRACE_DUMP names for `rank` and this process ("" when unset).
  static std::string dumpPath(int rank);

 private:
  // Applies slot's doneUntimed mark to its entry (under lock_).
  void settle(uint64_t slot) const;

  mutable SpinLock lock_;                 // record() and update() take it on every call: cheaper than a std::mutex
  mutable std::vector<TraceEntry> ring_;  // a power of two entries (settle() may end an entry while reading)
  uint64_t mask_;
  // Per slot: 1 + the id of the operation doneUntimed() ended there (0: none). A Running entry whose id matches is
  // Done: update() and snapshot() apply it under the lock.
  std::vector<std::atomic<uint64_t>> doneUntimed_;
  uint64_t next_ = 0;
  std::string commId_, name_;
  int rank_, nranks_;
};

}  // namespace hoccl
