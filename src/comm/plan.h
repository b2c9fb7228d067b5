/// @file plan.h
/// Turns recorded operations into executor tasks: algorithm choice, schedule, buffer binding, scratch, and the
/// pre/post hooks that implement Avg and PreMulSum on top of a sum.
#pragma once

#include <vector>

#include "comm/group.h"
#include "exec/executor.h"

namespace hoccl {

/// Tasks for ops (all of one communicator or several, in call order): per communicator, its point-to-point ops
/// become one task first, then one task per collective in order.
std::vector<exec::Task> planTasks(const std::vector<Op>& ops);

/// Whether a collective call is in place as the C API defines it.
bool isInPlace(const Op& op);

/// A short description for messages: "AllReduce(count=1024, float, sum)".
std::string describeOp(const Op& op);

}  // namespace hoccl
