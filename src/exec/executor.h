/// @file executor.h
/// The first interpreter of schedules: drives the communicator's channels and the CPU kernels to do the real work.
/// Tasks of one communicator run in order; tasks of different communicators (a group spanning several
/// communicators driven by one thread) progress together, so none waits on another.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "kernels/cpu/reduce.h"
#include "kernels/memory.h"
#include "sched/schedule.h"

namespace hoccl::exec {

/// Real memory for the buffer indices of a schedule, and how to combine elements.
struct Binding {
  std::vector<char*> buffers;                                 ///< buffer index -> base address
  size_t elemSize = 1;                                        ///< bytes per element of every buffer
  hocclDataType_t dtype = hocclUint8;                         ///< element type for reductions
  kernels::BinOp op = kernels::BinOp::Sum;                    ///< reduction for RecvReduce / Reduce
  const kernels::MemoryOps* mem = &kernels::hostMemoryOps();  ///< copies and reductions for the buffers' memory kind
  /// Device buffers the host cannot touch: sends and receives go through the communicator's staged channels
  /// (exec/staged_channel.h) instead of handing device memory to the transports.
  bool staged = false;
};

/// One schedule to run on one communicator, or (schedule null, poll set) an operation that drives itself.
struct Task {
  Communicator* comm = nullptr;                     ///< where it runs
  std::shared_ptr<const sched::Schedule> schedule;  ///< what to do (this rank's part; may be shared via a cache)
  std::function<bool()> poll;  ///< instead of a schedule (a transport shortcut): called until true, never blocks
  std::function<std::string()> waitingFor;  ///< with poll: the peers it still waits for, for the timeout message
  Binding binding;                          ///< on which memory
  std::function<std::string()> what;        ///< "AllReduce(count=.., float, sum) [ring]", built only for messages
  std::function<void()> before;  ///< runs just before the first step (e.g. PreMulSum input scaling), may be empty
  std::function<void()> after;   ///< runs right after the last step (e.g. Avg division), may be empty
  /// Runs a callback prim (sched::PrimKind::Notify or Produce) of the schedule with the memory the prim names: the
  /// overlapped collectives' user callbacks. Called on the executor's thread after the step's transfers are posted,
  /// while a helper thread keeps them moving (exec/progress_helper.h). Throws hoccl::Error to fail the task. Must be
  /// set when the schedule has callback prims.
  std::function<void(const sched::Prim& prim, char* data)> callback;
  std::vector<int> peers;  ///< with poll, lazy connections: peers it uses, connected before the task starts
  /// Lazy connections: the peers of the tasks after this one (of its communicator) are connected only once it has
  /// finished. The mismatch check (comm/call_check.h) is such a gate: ranks whose calls differ then fail in the check
  /// instead of waiting for a peer that makes another call and never connects.
  bool gate = false;
  /// With a schedule: polled after `before` until true, never blocks, before the first step; it may replace the
  /// task's schedule (a variant its peers agreed on in the prelude). `waitingFor` names whom it waits for. May be
  /// empty.
  std::function<bool(Task& self)> prelude;
  /// With a schedule: polled after the last step until true, never blocks, before `after`. May be empty.
  std::function<bool()> epilogue;
  /// The call its schedule's messages belong to (transport::RecvTarget::tag; comm/plan.h: callTagOf): sends carry
  /// it, receives compare it where the transport carries tags. 0: untagged (point-to-point, the mismatch check).
  transport::CallTag tag = 0;
};

/// Runs every task to completion. Throws hoccl::Error naming the rank, the operation, the step and the peer on a
/// peer failure, a timeout (HOCCL_TIMEOUT) or an abort.
void run(std::vector<Task>& tasks);

}  // namespace hoccl::exec
