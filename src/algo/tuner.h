/// @file tuner.h
/// Picks among applicable algorithms by predicted time (cost model over the schedule and link classes).
#pragma once

#include <vector>

#include "algo/registry.h"

namespace hoccl::algo {

/// The fastest of `candidates` (non-empty) for args on topo with elements of elemSize bytes.
const Algorithm& tune(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
                      const std::vector<const Algorithm*>& candidates);

}  // namespace hoccl::algo
