/// @file group.h
/// Enqueueing and groups: every API operation becomes an Op; outside a group it runs at once, inside
/// hocclGroupStart/End it waits for the outermost GroupEnd. Then each communicator's point-to-point operations run
/// together as one step (so send/recv pairs never deadlock, whatever their order), followed by its collectives in
/// call order; different communicators progress together. Ops on device buffers are stream-ordered: a group's ops
/// of one communicator go to its proxy together (comm/proxy.h) and GroupEnd returns without waiting for them, unless
/// that communicator's part of the group also has host buffers (then GroupEnd waits for it).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/redop.h"
#include "exec/executor.h"
#include "hoccl/hoccl.h"
#include "kernels/memory.h"
#include "sched/schedule.h"

namespace hoccl {

/// One recorded operation (already validated by the API edge).
struct Op {
  enum class Kind { Collective, Send, Recv } kind = Kind::Collective;  ///< what it is
  Communicator* comm = nullptr;                                        ///< where
  sched::Coll coll = sched::Coll::AllReduce;                           ///< for collectives
  const void* sendbuf = nullptr;                                       ///< input (or the send buffer)
  void* recvbuf = nullptr;                                             ///< output (or the receive buffer)
  size_t count = 0;                                                    ///< elements as the C API takes them
  hocclDataType_t dtype = hocclFloat;                                  ///< element type
  hocclRedOp_t op = hocclSum;                                          ///< reduction (may be a PreMulSum handle)
  int root = 0;                                                        ///< root for rooted collectives
  int peer = -1;                                                       ///< peer for Send / Recv
  kernels::MemoryKind sendKind = kernels::MemoryKind::Host;  ///< where sendbuf lives (classified once, at the edge)
  kernels::MemoryKind recvKind = kernels::MemoryKind::Host;  ///< where recvbuf lives
  uint64_t seq = 0;      ///< a collective's sequence number on its communicator (set by enqueue)
  /// seq is set and the call noted on the call boards already: stream-ordered ops are numbered in call order when
  /// they are enqueued (on the caller's thread), not when the proxy runs them.
  bool numbered = false;
  uint64_t traceId = 0;  ///< its entry in the communicator's flight recorder (set by enqueue)
  bool recorded = false;  ///< already in the flight recorder (enqueued in a group): running updates that entry
  /// A PreMulSum op's definition, captured at the call for stream-ordered ops (the handle may be destroyed as soon as
  /// the call returns); null otherwise (looked up by handle when the op runs, still inside the call).
  std::shared_ptr<const PreMulSumOp> premul;
  void* stream = nullptr;  ///< the caller's stream (orders the op when its buffers are device memory)
  const char* label = nullptr;  ///< overrides the collective's name in messages ("AllGatherOverlap"); comm/overlap.h
  /// Keeps the op's shared blocks (hocclMemAlloc) and registrations from being freed or deregistered while any copy
  /// of the op lives (until it has run); null when its buffers are neither.
  std::shared_ptr<void> pins;
  /// True for an op on device buffers: it is stream-ordered and runs on the communicator's proxy (comm/proxy.h).
  bool onDevice() const { return sendKind == kernels::MemoryKind::Device || recvKind == kernels::MemoryKind::Device; }
};

/// Runs op now (host buffers) or hands it to its communicator's proxy (device buffers: stream-ordered), or records
/// it when a group is open on this thread.
void enqueue(const Op& op);
/// Runs ops of host or device memory on the calling thread until they are done (the proxy's part of enqueue).
void runOps(std::vector<Op> ops);
/// Runs tasks built by the caller for op (one communicator; the overlapped collectives of comm/overlap.h) like a
/// collective, after the communicator's stream-ordered work: op gets its sequence number and flight-recorder entry
/// (with `algorithm`), and a failure that breaks the communicator reaches every rank as a collective's does.
void runTasksFor(Op& op, const char* algorithm, std::vector<exec::Task>& tasks);
/// Opens a (possibly nested) group on this thread.
void groupStart();
/// Closes a group; the outermost close runs everything recorded. On error, the remaining ops are dropped.
void groupEnd();
/// Depth of the open groups on this thread (0 = none).
int groupDepth();
/// Predicted seconds of the ops recorded in the open group (for ncclGroupSimulateEnd); 0 when none.
float groupSimulatedSeconds();
/// Closes a group like groupEnd, but the outermost close drops what was recorded instead of running it
/// (ncclGroupSimulateEnd). Added by the NCCL shim.
void groupDiscard();

}  // namespace hoccl
