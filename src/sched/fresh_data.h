/// @file fresh_data.h
/// Which sends of a schedule pass on data their rank has just written: the cost model prices those at the cached
/// rate (topo::LinkModel::streamedBytes), since a pipelined schedule whose pieces fit a core's cache sends them
/// before they leave it, where a schedule of large blocks reads them back from memory.
#pragma once

#include "sched/schedule.h"

namespace hoccl::sched {

/// Whether `send` (a Send prim of one rank's step) reads only data the rank wrote in `previous`, its step before:
/// its source range lies within the destination range of one Recv, RecvReduce, Copy or Reduce of that step on the
/// same buffer. False when `previous` is null (the first step) or `send` is not a Send.
bool sendsFreshData(const Step* previous, const Prim& send);

}  // namespace hoccl::sched
