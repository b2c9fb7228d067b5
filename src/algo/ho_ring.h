/// @file ho_ring.h
/// HO-Ring (Hierarchical Overlapping Rings) schedule generator for all-reduce, reduce-scatter and all-gather. See
/// the block comment in ho_ring.cc.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "kernels/fold_order.h"
#include "sched/schedule.h"
#include "topology/topology.h"

namespace hoccl::algo {

/// Whether HO-Ring can run args on topo: AllReduce, ReduceScatter or AllGather and a topology of args.nranks ranks. Uneven shapes
/// are applicable too (levels are merged; in the worst case it is one topology-ordered ring).
bool hoRingApplicable(const sched::CollArgs& args, const topo::Topology& topo);
/// The HO-Ring schedule of args.rank. Throws InvalidArgument when not applicable.
sched::Schedule hoRingSchedule(const sched::CollArgs& args, const topo::Topology& topo);

/// How HO-Ring's all-reduce and reduce-scatter fold each element (kernels/fold_order.h), on a hierarchy of one
/// level (one ring: the ranks of one host): all-reduce adds part j of every chunk along the ring from position j + 1
/// round to position j; reduce-scatter adds rank r's block from the position after r's round to r's. Nothing for
/// all-gather, for one rank, or for several levels, whose folds nest one ring in another.
std::optional<kernels::FoldOrder> hoRingFold(const sched::CollArgs& args, const topo::Topology& topo);

/// HO-Ring with its level 0 (the ranks of a host) run by someone else, the transport's host level
/// (transports/shortcut.h: HostLevel): which ranks form this rank's level-0 ring and which pieces this rank holds
/// after the level-0 reduce-scatter (all-reduce: one range of the output per chunk, the ranges the upper levels then
/// work on; reduce-scatter and all-gather: the level-0 part of every chunk of the scratch, cut where its blocks
/// change owner, each with its place in the host ranks' input or output).
struct HoRingHostSplit {
  /// One piece: `len` elements at `off` of the host ranks' input (reduce-scatter) or output (all-gather), or of
  /// the output (all-reduce), held at `work` of this rank's working buffer (scratch; all-reduce: the output).
  struct Piece {
    size_t off = 0;   ///< elements into the host ranks' buffers
    size_t work = 0;  ///< elements into this rank's working buffer
    size_t len = 0;   ///< elements
  };
  bool applicable = false;  ///< at least one element, at least two levels, level 0 of >= 2 ranks
  std::vector<int> ring;    ///< the ranks of this rank's level-0 ring, ascending
  std::vector<Piece> mine;  ///< in chunk order, none empty
};
/// See HoRingHostSplit. Uses the same chunking as hoRingSchedule for the same args.
HoRingHostSplit hoRingHostSplit(const sched::CollArgs& args, const topo::Topology& topo);
/// hoRingSchedule without the steps of level 0 (split applicable): all-reduce's upper levels start from the output,
/// where the host level left this rank's ranges reduced over the host, and leave the output's other ranges for the
/// host level to fill; reduce-scatter's start from the scratch the host level reduced (no copy-in); all-gather's end
/// in the scratch, from which the host level writes every host rank's output (no copy-out). Every message between
/// hosts keeps its place in the order of hoRingSchedule, so a host that runs level 0 this way and one that runs the
/// ring steps can meet (InvalidArgument when not applicable).
sched::Schedule hoRingScheduleAboveHost(const sched::CollArgs& args, const topo::Topology& topo);

/// The number of pipeline chunks HO-Ring uses for a working buffer of `elems` elements over `nranks` ranks when
/// args.chunkCount is 0 (exposed for tests and the cost model).
size_t hoRingDefaultChunks(size_t elems, int nranks);

}  // namespace hoccl::algo
