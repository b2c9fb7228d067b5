/// @file predict.h
/// Predicting an algorithm's run time at any scale: the reference simulation of every rank
/// (sched/cost_model.h) for small jobs, the fast representative model (sched/fast_model.h) above, with the
/// representatives and step alignment each algorithm's symmetry allows. The tuner and hoccl-model use predict().
#pragma once

#include "algo/registry.h"
#include "sched/cost_model.h"
#include "sched/fast_model.h"

namespace hoccl::algo {

/// Jobs up to this many ranks are simulated rank by rank (exact for the model), larger ones by the fast path. The
/// cost of the reference grows with the square of the ranks and with the chunks: it was 64 until a measurement of
/// what the tuner then costs every rank at its first call of a size (`hoccl-model predict --sizes 64M:64M`, this
/// 2-core machine): 10.4 s on 8 hosts x 8 ranks, 0.74 s at 1 MiB; 184 s for one host of 64 ranks over 8 B..64 MiB.
/// Up to 8 ranks (the namespace cluster's 2x2x2 and every small one-host job) it costs milliseconds; above, the fast
/// path agrees with it within 15% on regular shapes (test_fast_model) at a cost independent of the sizes.
constexpr int kMaxFullSimRanks = 8;

/// The fast path's options for alg on args/topo: every rank for rooted collectives (with the ring chains' step
/// alignment), rank 0 alone for HO-Ring on a regular hierarchy, else one switch per switch shape.
topo::FastOptions fastOptions(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo);

/// The fast prediction of alg (args.rank is ignored).
topo::Prediction predictFast(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo,
                             size_t elemSize, const topo::LinkModel& model);

/// The most ranks any host of topo holds.
int maxRanksPerHost(const topo::Topology& topo);

/// The full simulation up to kMaxFullSimRanks ranks, the fast prediction above, priced with
/// model.crowded(maxRanksPerHost(topo)): with more ranks on a host than model.cores, the self and intra-host costs
/// grow as the shm shortcuts' prices do (topology/link_model.h), so schedules and shortcuts compete on one footing.
topo::Prediction predict(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
                         const topo::LinkModel& model);

/// One schedule against another, as `hoccl-model calibrate` times them: `a` at `aArgs` (sending cache-sized data it
/// wrote the step before: HO-Ring at a small chunk) and `b` at `bArgs` (the ring), on topo.
struct CachePair {
  const Algorithm* a;      ///< the schedule the cache term favours
  sched::CollArgs aArgs;   ///< its arguments (with its chunk)
  const Algorithm* b;      ///< the schedule it is measured against
  sched::CollArgs bArgs;   ///< its arguments
};

/// time(a) / time(b) as predict() gives them with `gain` as the cache gain, everything else of `model` kept.
double cacheRatio(const CachePair& pair, const topo::Topology& topo, size_t elemSize, const topo::LinkModel& model,
                  double gain);

/// The cache gain (LinkModel::cacheGain) in [lo, hi] at which cacheRatio() = measuredRatio,
/// everything else of `model` kept: bisection, since the predicted ratio falls as the gain grows (a's fresh bytes get
/// cheaper, b's do not, or less); lo when measuredRatio is at or above the prediction at lo (a gains nothing beyond
/// the model without the term), hi when it is at or below the prediction at hi.
double fitCacheGain(double measuredRatio, const CachePair& pair, const topo::Topology& topo, size_t elemSize,
                    const topo::LinkModel& model, double lo = 1.0, double hi = 3.0);

}  // namespace hoccl::algo
