/// @file ho_ring.h
/// HO-Ring (Hierarchical Overlapping Rings) schedule generator for all-reduce, reduce-scatter and all-gather. See
/// the block comment in ho_ring.cc.
#pragma once

#include "sched/schedule.h"
#include "topology/topology.h"

namespace hoccl::algo {

/// Whether HO-Ring can run args on topo: AllReduce, ReduceScatter or AllGather and a topology of args.nranks ranks. Uneven shapes
/// are applicable too (levels are merged; in the worst case it is one topology-ordered ring).
bool hoRingApplicable(const sched::CollArgs& args, const topo::Topology& topo);
/// The HO-Ring schedule of args.rank. Throws InvalidArgument when not applicable.
sched::Schedule hoRingSchedule(const sched::CollArgs& args, const topo::Topology& topo);

/// The number of pipeline chunks HO-Ring uses for a working buffer of `elems` elements over `nranks` ranks when
/// args.chunkCount is 0 (exposed for tests and the cost model).
size_t hoRingDefaultChunks(size_t elems, int nranks);

}  // namespace hoccl::algo
