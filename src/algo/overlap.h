/// @file overlap.h
/// Schedules of the operations that let the caller compute between transfers (include/hoccl/hoccl.h, "Communication
/// hidden behind compute"): the overlapped all-gather and reduce-scatter, whose schedules carry callback prims
/// (sched::PrimKind::Notify, Produce), and the ring shift. See the block comment in overlap.cc and docs/overlap.md.
#pragma once

#include <vector>

#include "sched/schedule.h"
#include "topology/topology.h"

namespace hoccl::algo {

/// The overlapped all-gather of args.rank (args.count = elements per rank's block). Notify prims hand each block to
/// the callback as soon as it is in the output, own block first, then the blocks in the order the ring delivers
/// them; every Notify but the last runs while the next transfer is in flight. With `twoLevel` and a topology of
/// equal hosts (algo/overlap_two_level.h) the two-level schedule, else the flat ring.
sched::Schedule overlapAllGatherSchedule(const sched::CollArgs& args, const topo::Topology& topo, bool twoLevel = true);

/// The overlapped reduce-scatter of args.rank (args.count = elements per block): Produce prims ask for the input
/// block of each destination just before the ring needs it, the own block last; each Produce but the first runs while
/// a transfer is in flight, and after the last one only the final transfer (which it hides) and a local reduction
/// remain. Needs scratch for two blocks (four for the two-level schedule, chosen as for the all-gather).
sched::Schedule overlapReduceScatterSchedule(const sched::CollArgs& args, const topo::Topology& topo,
                                             bool twoLevel = true);

/// The order in which the overlapped collectives of `rank` visit the blocks: the all-gather's delivery order (own
/// block first) and the reduce-scatter's produce order (own block last); `twoLevel` as for the schedules.
std::vector<int> overlapBlockOrder(const topo::Topology& topo, int rank, bool reduceScatter, bool twoLevel = true);

/// The ring shift of args.rank by `shift` (any integer: taken modulo args.nranks): send the input to rank
/// (rank + shift) mod n, receive the output from (rank - shift) mod n; a shift of 0 is a local copy. In place
/// (args.inPlace) the input is staged in scratch first.
sched::Schedule ringShiftSchedule(const sched::CollArgs& args, long long shift);

}  // namespace hoccl::algo
