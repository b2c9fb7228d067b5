/// @file host_level_plan.h
/// HO-Ring's all-reduce, reduce-scatter and all-gather with their host level run by a transport
/// (transports/shortcut.h: HostLevel) when every rank of the host registered its buffers: the planner (comm/plan.h)
/// hands the task to attachHostLevel, which adds a prelude (the host's address round; when mapped, the host-level
/// reduction into the working buffer, the output or the scratch, and the schedule without level 0) and an epilogue
/// (the host-level copies into the outputs and the closing round). Otherwise the task runs HO-Ring's ring steps.
#pragma once

#include "comm/plan.h"

namespace hoccl {

/// When `task` (planned for op, resolved as r) is an HO-Ring all-reduce, reduce-scatter or all-gather whose level-0 ring is exactly the ranks the
/// communicator's host level groups, and the host level can run the call: sets task.prelude, task.epilogue and
/// task.waitingFor so that the host level runs on mapped memory when the host agrees, and returns true. Else
/// leaves the task as it is and returns false. The same answer on every rank of a host.
bool attachHostLevel(exec::Task& task, const Op& op, const Resolved& r);

}  // namespace hoccl
