/// @file direct.h
/// Direct pairwise exchange: all-to-all, gather and scatter as one step of concurrent sends and receives, and
/// one-shot (single communication step) variants of the other collectives for small messages.
#pragma once

#include <optional>

#include "kernels/fold_order.h"
#include "sched/schedule.h"
#include "topology/topology.h"

namespace hoccl::algo {

/// Direct schedule for args.rank (every collective).
sched::Schedule directSchedule(const sched::CollArgs& args, const topo::Topology& topo);

/// How the direct all-reduce and reduce-scatter fold each element (kernels/fold_order.h): in rank order 0, 1, ...,
/// N-1 on every rank. Nothing for the other collectives.
std::optional<kernels::FoldOrder> directFold(const sched::CollArgs& args, const topo::Topology& topo);

}  // namespace hoccl::algo
