/// @file direct.h
/// Direct pairwise exchange: all-to-all, gather and scatter as one step of concurrent sends and receives, and
/// one-shot (single communication step) variants of the other collectives for small messages.
#pragma once

#include "sched/schedule.h"
#include "topology/topology.h"

namespace hoccl::algo {

/// Direct schedule for args.rank (every collective).
sched::Schedule directSchedule(const sched::CollArgs& args, const topo::Topology& topo);

}  // namespace hoccl::algo
