/// @file registered_plan.h
/// A collective whose tuner choice is "a schedule, or a shortcut where every rank registered its buffers"
/// (algo::Choice::ifRegistered: shm single copy over mappings is faster than any schedule, through the kernel
/// slower): the planner (comm/plan.h) gives the schedule's task a prelude that starts the shortcut for registered
/// buffers only. Its first round tells every rank alike whether all registered: then the shortcut runs the call and
/// the task's schedule and hooks are dropped; otherwise it ends without touching any peer's memory and the schedule
/// runs. A rank knows only its own buffers, so the choice cannot be made before that round.
#pragma once

#include "comm/plan.h"

namespace hoccl {

/// When r's decision has an ifRegistered shortcut: sets task.prelude and task.waitingFor as above (the task must
/// have no prelude yet) and returns true. Else leaves the task as it is and returns false. The same answer on every
/// rank.
bool attachRegisteredShortcut(exec::Task& task, const Op& op, const Resolved& r);

}  // namespace hoccl
