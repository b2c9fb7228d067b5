/// @file plan.h
/// Turns recorded operations into executor tasks: algorithm choice, schedule, buffer binding, scratch, and the
/// pre/post hooks that implement Avg and PreMulSum on top of a sum.
#pragma once

#include <vector>

#include "comm/group.h"
#include "exec/executor.h"

namespace hoccl {

/// A collective op as the tuner, the shortcuts and the schedules see it, and what runs it.
struct Resolved {
  transport::CollCall call;                          ///< for the shortcuts
  sched::CollArgs args;                              ///< for the schedules (this rank)
  size_t elemSize = 0;                               ///< bytes per element
  const Communicator::Decision* decision = nullptr;  ///< the tuner's choice (Communicator::decide)
  OnlineChoice* online = nullptr;                    ///< the shape's online choice, if it has one
};
/// Collective op as the shortcuts see it (its number set once it has started); no fold.
transport::CollCall collCallOf(const Op& op);
/// The tag of a started collective's messages (exec::Task::tag): a hash of its number, collective, type, op (every
/// PreMulSum alike), count and root, the same on every rank for the same call; never 0.
transport::CallTag callTagOf(const Op& op);
/// Resolves a validated collective op on its communicator: the one decision of what runs it.
Resolved resolve(const Op& op);

/// Runs a shortcut op to completion on this thread with the waiting policy of base/wait.h. The caller counts the op
/// in flight (Communicator::inFlight) for hocclCommAbort from another thread.
void runShortcut(const Op& op, const Resolved& r);

/// Tasks for ops (all of one communicator or several, in call order): per communicator, its point-to-point ops
/// become one task first, then one task per collective in order.
std::vector<exec::Task> planTasks(const std::vector<Op>& ops);

/// Whether a collective call is in place as the C API defines it.
bool isInPlace(const Op& op);

/// Bytes of the largest buffer of collective op on this rank's communicator (nccl-tests' "size": count x type size x
/// the blocks of its larger buffer, base/collective.h).
size_t largestBufferBytes(const Op& op);

/// A short description for messages: "AllReduce(count=1024, float, sum)".
std::string describeOp(const Op& op);

}  // namespace hoccl
