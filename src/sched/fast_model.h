/// @file fast_model.h
/// The cost model's fast path: predicts an operation from a few representative ranks instead of simulating every
/// rank (sched/cost_model.h stays the reference it is tested against). It assumes the ranks run their steps in
/// lockstep (step k of every rank at the same time) and that ranks the
/// representatives stand for behave like them (the schedules are symmetric under moving a whole switch, or, for
/// OneRank, under every coordinate shift of a regular hierarchy). See docs/model.md.
#pragma once

#include <functional>

#include "sched/cost_model.h"

namespace hoccl::topo {

/// Which ranks are simulated.
enum class Representatives {
  All,            ///< every rank (rooted collectives, small or irregular jobs)
  OneSwitchEach,  ///< the ranks of one switch per distinct switch shape (schedules symmetric under switch shifts)
  OneRank,        ///< rank 0 alone (schedules symmetric under every coordinate shift of a regular hierarchy)
};

/// How to run the fast path.
struct FastOptions {
  Representatives reps = Representatives::OneSwitchEach;  ///< which ranks are simulated
};

/// Predicts the operation whose rank r runs gen(r) on topo. Costs O(representatives x schedule length).
/// Prediction::bytes and messages are scaled from the representatives to the whole job.
Prediction predictFast(const std::function<sched::Schedule(int rank)>& gen, const Topology& topo, size_t elemSize,
                       const LinkModel& model, const FastOptions& options);

}  // namespace hoccl::topo
