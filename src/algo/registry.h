/// @file registry.h
/// Every algorithm hoccl has, as schedule generators, and the choice between them: HOCCL_ALGO forces one (an
/// unknown name is an error listing the valid ones), otherwise the tuner (tuner.h) picks per call.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/fold_order.h"
#include "sched/schedule.h"
#include "topology/topology.h"

namespace hoccl::algo {

/// An algorithm: its name, what it can do, and its generator.
struct Algorithm {
  const char* name;  ///< "ring", "ho_ring", "direct", ...
  /// Whether it implements this collective.
  bool (*supports)(sched::Coll coll);
  /// Whether it can run this call on this topology (e.g. HO-Ring needs a regular enough shape).
  bool (*applicable)(const sched::CollArgs& args, const topo::Topology& topo);
  /// The schedule of args.rank.
  sched::Schedule (*generate)(const sched::CollArgs& args, const topo::Topology& topo);
  /// How its reductions fold each element (kernels/fold_order.h), for the same args (chunk included) and topology;
  /// null, or nothing returned, where it cannot say (then a shortcut cannot give its bits).
  std::optional<kernels::FoldOrder> (*fold)(const sched::CollArgs& args, const topo::Topology& topo) = nullptr;
};

/// Every algorithm, in order of preference when nothing else decides.
const std::vector<Algorithm>& all();
/// The algorithm called `name` (case-insensitive); throws InvalidArgument listing the valid names.
const Algorithm& byName(const std::string& name);
/// The comma-separated list of valid names, for error messages.
std::string validNames();
/// The algorithms that support args.coll and are applicable, in registry order.
std::vector<const Algorithm*> candidates(const sched::CollArgs& args, const topo::Topology& topo);
/// The algorithm for this call: HOCCL_ALGO (if it supports the collective; else the default), else the tuner.
const Algorithm& choose(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize);

}  // namespace hoccl::algo
