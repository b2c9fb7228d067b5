/// @file group.h
/// Enqueueing and groups: every API operation becomes an Op; outside a group it runs at once, inside
/// hocclGroupStart/End it waits for the outermost GroupEnd. Then each communicator's point-to-point operations run
/// together as one step (so send/recv pairs never deadlock, whatever their order), followed by its collectives in
/// call order; different communicators progress together.
#pragma once

#include <cstddef>

#include "comm/communicator.h"
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
  uint64_t traceId = 0;  ///< its entry in the communicator's flight recorder (set by enqueue)
};

/// Runs op now, or records it when a group is open on this thread.
void enqueue(const Op& op);
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
