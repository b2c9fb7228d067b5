/// @file predict.h
/// Predicting an algorithm's run time at any scale: the reference simulation of every rank
/// (sched/cost_model.h) for small jobs, the fast representative model (sched/fast_model.h) above, with the
/// representatives and step alignment each algorithm's symmetry allows. The tuner and hoccl-model use predict().
#pragma once

#include "algo/registry.h"
#include "sched/cost_model.h"
#include "sched/fast_model.h"

namespace hoccl::algo {

/// Jobs up to this many ranks are simulated rank by rank (exact for the model; ~1 s for 64 ranks x 2 algorithms).
constexpr int kMaxFullSimRanks = 64;

/// The fast path's options for alg on args/topo: every rank for rooted collectives (with the ring chains' step
/// alignment), rank 0 alone for HO-Ring on a regular hierarchy, else one switch per switch shape.
topo::FastOptions fastOptions(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo);

/// The fast prediction of alg (args.rank is ignored).
topo::Prediction predictFast(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo,
                             size_t elemSize, const topo::LinkModel& model);

/// The full simulation up to kMaxFullSimRanks ranks, the fast prediction above.
topo::Prediction predict(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
                         const topo::LinkModel& model);

}  // namespace hoccl::algo
