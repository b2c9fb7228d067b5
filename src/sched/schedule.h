/// @file schedule.h
/// "One schedule, three interpreters": every algorithm is a pure function that produces, for one rank, an ordered
/// list of steps. The executor (src/exec) runs it over transports, the verifier (src/sched/verifier.h) runs all
/// ranks in memory, and the cost model (sched/cost_model.h) prices it.
///
/// Semantics, which every interpreter implements identically:
/// - Buffers are named by a small index into a binding table. Collectives use kInput, kOutput, kScratch; a group
///   of point-to-point calls uses one index per call. kInput and kOutput may alias (in-place calls): an algorithm
///   must be correct for both the aliased and the separate binding.
/// - Offsets and counts are in elements of the binding's element size.
/// - The prims of one step run concurrently; a rank starts step k+1 only when every prim of step k is complete.
/// - Messages between one ordered pair of ranks match in posting order (FIFO); a send must be matched by a receive
///   of the same count.
/// - A schedule must be deadlock-free under rendezvous semantics (a send completes only when the peer has posted
///   the matching receive in its current step): then it is deadlock-free with any amount of transport buffering.
/// - Reductions use one commutative, associative binary op (sum, prod, max, min). Avg and PreMulSum are mapped
///   onto sum by the executor (pre-scaling the input, dividing the output).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/collective.h"

namespace hoccl::sched {

/// Buffer indices used by collective schedules.
enum : uint16_t { kInput = 0, kOutput = 1, kScratch = 2 };

/// The primitive operations of a step.
enum class PrimKind : uint8_t {
  Send,        ///< send src[srcOff, +count) to peer
  Recv,        ///< dst[dstOff, +count) = data from peer
  RecvReduce,  ///< dst[dstOff, +count) = op(src[srcOff, +count), data from peer)
  Copy,        ///< dst[dstOff, +count) = src[srcOff, +count) (skipped when both name the same memory)
  Reduce,      ///< dst[dstOff, +count) = op(dst[dstOff, +count), src[srcOff, +count))
  /// Hands src[srcOff, +count) to the task's callback, read-only, with tag `peer` (the overlapped all-gather's
  /// onBlock: the rank the block came from). Runs after the step's transfers are posted, while they are in flight.
  Notify,
  /// Asks the task's callback to write dst[dstOff, +count), with tag `peer` (the overlapped reduce-scatter's
  /// produce: the rank the block is for). Runs after the step's transfers are posted, while they are in flight.
  Produce,
};

/// One primitive operation. Unused fields are 0 (peer -1).
struct Prim {
  PrimKind kind;      ///< what to do
  int peer = -1;      ///< peer rank for Send / Recv / RecvReduce
  uint16_t src = 0;   ///< source buffer index (Send, RecvReduce, Copy, Reduce)
  uint16_t dst = 0;   ///< destination buffer index (Recv, RecvReduce, Copy, Reduce)
  size_t srcOff = 0;  ///< source offset in elements
  size_t dstOff = 0;  ///< destination offset in elements
  size_t count = 0;   ///< number of elements
};

/// A set of prims that run concurrently.
struct Step {
  std::vector<Prim> prims;  ///< the prims of this step
};

/// One rank's schedule for one operation.
struct Schedule {
  std::vector<Step> steps;  ///< in order
  size_t scratchCount = 0;  ///< elements of scratch memory the schedule needs (buffer kScratch)
  std::string algorithm;    ///< name of the algorithm that produced it ("ring", "ho_ring", "direct", ...)
};

/// Prim constructors that read like the schedule they build.
inline Prim send(int peer, uint16_t src, size_t off, size_t count) {
  return Prim{PrimKind::Send, peer, src, 0, off, 0, count};
}
/// Receive count elements from peer into dst at off.
inline Prim recv(int peer, uint16_t dst, size_t off, size_t count) {
  return Prim{PrimKind::Recv, peer, 0, dst, 0, off, count};
}
/// Receive count elements from peer and combine them with src[srcOff..] into dst[dstOff..].
inline Prim recvReduce(int peer, uint16_t src, size_t srcOff, uint16_t dst, size_t dstOff, size_t count) {
  return Prim{PrimKind::RecvReduce, peer, src, dst, srcOff, dstOff, count};
}
/// Copy count elements locally.
inline Prim copy(uint16_t src, size_t srcOff, uint16_t dst, size_t dstOff, size_t count) {
  return Prim{PrimKind::Copy, -1, src, dst, srcOff, dstOff, count};
}
/// Reduce count elements of src into dst locally.
inline Prim reduceLocal(uint16_t src, size_t srcOff, uint16_t dst, size_t dstOff, size_t count) {
  return Prim{PrimKind::Reduce, -1, src, dst, srcOff, dstOff, count};
}

/// Hands src[off, +count) to the callback with tag `tag`, read-only (see PrimKind::Notify).
inline Prim notify(int tag, uint16_t src, size_t off, size_t count) {
  return Prim{PrimKind::Notify, tag, src, 0, off, 0, count};
}
/// Asks the callback to write dst[off, +count) for tag `tag` (see PrimKind::Produce).
inline Prim produce(int tag, uint16_t dst, size_t off, size_t count) {
  return Prim{PrimKind::Produce, tag, 0, dst, 0, off, count};
}
/// Whether p calls the task's callback (Notify or Produce).
inline bool isCallback(const Prim& p) { return p.kind == PrimKind::Notify || p.kind == PrimKind::Produce; }

/// The collectives that algorithms generate schedules for (base/collective.h).
using hoccl::Coll;
using hoccl::collName;

/// What a schedule generator needs to know. Counts are in elements, as the C API takes them:
/// AllReduce/Broadcast/Reduce: count per buffer; AllGather: sendcount; ReduceScatter: recvcount;
/// AlltoAll/Gather/Scatter: count per block.
struct CollArgs {
  Coll coll;              ///< which collective
  int rank = 0;           ///< this rank
  int nranks = 1;         ///< ranks in the communicator
  size_t count = 0;       ///< element count as the C API takes it
  int root = 0;           ///< root rank for Broadcast/Reduce/Gather/Scatter
  size_t chunkCount = 0;  ///< pipelining chunk in elements (0 = algorithm default)
  bool inPlace = false;   ///< input and output alias as the C API defines in-place (lets algorithms skip staging)
};

/// Element count of the input and output buffers for args (per rank), e.g. AllGather: {count, count*nranks}.
struct BufferCounts {
  size_t input;   ///< elements of the input buffer
  size_t output;  ///< elements of the output buffer
};
/// The per-rank buffer sizes of a collective.
BufferCounts bufferCounts(const CollArgs& args);

}  // namespace hoccl::sched
