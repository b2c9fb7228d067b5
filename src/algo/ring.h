/// @file ring.h
/// Flat ring algorithms (the yardstick): pipelined ring all-reduce, reduce-scatter, all-gather, and chained
/// broadcast and reduce. The ring visits ranks host by host and switch by switch (ringOrder) so that, of its N
/// edges, as few as possible cross hosts and switches.
#pragma once

#include <optional>
#include <vector>

#include "kernels/fold_order.h"
#include "sched/schedule.h"
#include "topology/topology.h"

namespace hoccl::algo {

/// The ring order: ranks sorted by (switch, host, NUMA node, local index).
std::vector<int> ringOrder(const topo::Topology& topo);

/// Ring schedule for args.rank (AllReduce, ReduceScatter, AllGather, Broadcast, Reduce).
sched::Schedule ringSchedule(const sched::CollArgs& args, const topo::Topology& topo);

/// How the ring's all-reduce and reduce-scatter fold each element (kernels/fold_order.h): block b of the buffer the
/// reduction reads (the input; blockStart over the whole input) is added up along the ring from the position after
/// rank b's round to rank b's. Nothing for the other collectives.
std::optional<kernels::FoldOrder> ringFold(const sched::CollArgs& args, const topo::Topology& topo);

/// The first element of block b when count elements are split into n nearly equal blocks.
size_t blockStart(size_t count, int n, int b);

}  // namespace hoccl::algo
