/// @file overlap_two_level.h
/// The two-level (HO-Ring-aware) schedules of the overlapped all-gather and reduce-scatter: for communicators with
/// L >= 2 ranks on each of H >= 2 hosts, inter-host blocks travel a ring of their own per host-local index, cut into
/// pieces that run beside the intra-host ring's steps and the callbacks. See the block comment in
/// overlap_two_level.cc; algo/overlap.h picks them.
#pragma once

#include <vector>

#include "sched/schedule.h"
#include "topology/topology.h"

namespace hoccl::algo {

/// Whether topo has the two levels these schedules need: hosts of L >= 2 ranks each, at least 2 hosts.
bool twoLevelApplies(const topo::Topology& topo);

/// The two-level overlapped all-gather of args.rank (twoLevelApplies(topo) must hold).
sched::Schedule twoLevelAllGatherSchedule(const sched::CollArgs& args, const topo::Topology& topo);

/// The two-level overlapped reduce-scatter of args.rank (twoLevelApplies(topo) must hold); scratch for four blocks.
sched::Schedule twoLevelReduceScatterSchedule(const sched::CollArgs& args, const topo::Topology& topo);

/// The order in which the two-level schedules of `rank` hand over (all-gather) or ask for (reduce-scatter) blocks.
std::vector<int> twoLevelBlockOrder(const topo::Topology& topo, int rank, bool reduceScatter);

}  // namespace hoccl::algo
