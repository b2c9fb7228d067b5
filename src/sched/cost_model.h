/// @file cost_model.h
/// The third interpreter of a schedule: predicts how long the schedules of all ranks take on a topology, with an
/// alpha-beta model per link class and shared links (a host's NIC, a switch's uplink to the spine), under the same
/// rendezvous semantics the executor and verifier use. The tuner compares algorithms with it; hoccl-topo and
/// hoccl-model use it to predict clusters that do not exist.
#pragma once

#include <string>
#include <vector>

#include "hoccl/hoccl.h"
#include "sched/schedule.h"
#include "topology/link_model.h"
#include "topology/topology.h"

namespace hoccl::topo {

/// What the model predicts for one operation.
struct Prediction {
  double seconds = 0;                      ///< completion time of the slowest rank
  double bytes[hocclNumLinkClasses] = {};  ///< payload bytes sent, all ranks, by link class
  size_t messages = 0;                     ///< point-to-point messages
  size_t maxSteps = 0;                     ///< steps of the longest schedule
};

/// Simulates schedules[r] for every rank r of topo with elements of elemSize bytes. With a shaped spine
/// (model.spineBurst > 0) the call is priced as one of a series of back-to-back calls (the uplinks' token buckets
/// start where the previous call left them). Throws InvalidArgument when the schedules do not match (a send without
/// a receive, different counts) or deadlock.
Prediction predict(const std::vector<sched::Schedule>& schedules, const Topology& topo, size_t elemSize,
                   const LinkModel& model);

}  // namespace hoccl::topo
