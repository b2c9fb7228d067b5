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
#include "topology/topology.h"

namespace hoccl::topo {

/// Link parameters. Bandwidths in bytes per second, latencies in seconds.
struct LinkModel {
  /// Per message start-up cost, by link class (Self: per local copy/reduce prim).
  double alpha[hocclNumLinkClasses] = {0.1e-6, 2e-6, 15e-6, 20e-6};
  /// Peak rate of one flow, by link class (Self: local copy/reduce rate).
  double beta[hocclNumLinkClasses] = {10e9, 8e9, 1.2e9, 1.2e9};
  /// Capacity of one host's NIC per direction, shared by all flows leaving (or entering) the host.
  double nic = 1.2e9;
  /// Capacity of one switch's uplink per direction, shared by all flows leaving (or entering) the switch.
  double spine = 1.2e9;
  /// The defaults overridden by HOCCL_LINK_BW_{SELF,INTRA_HOST,INTRA_SWITCH,INTER_SWITCH} (MB/s) and
  /// HOCCL_LINK_LAT_{SELF,INTRA_HOST,INTRA_SWITCH,INTER_SWITCH} (microseconds). The NIC takes the intra-switch
  /// bandwidth, the spine uplink the inter-switch bandwidth. Throws InvalidArgument on a non-positive value.
  static LinkModel fromParams();
  /// One line for logs: "self 10.0 GB/s 1.0 us, intra-host ...".
  std::string describe() const;
};

/// What the model predicts for one operation.
struct Prediction {
  double seconds = 0;                             ///< completion time of the slowest rank
  double bytes[hocclNumLinkClasses] = {};         ///< payload bytes sent, all ranks, by link class
  size_t messages = 0;                            ///< point-to-point messages
  size_t maxSteps = 0;                            ///< steps of the longest schedule
};

/// Simulates schedules[r] for every rank r of topo with elements of elemSize bytes. Throws InvalidArgument when
/// the schedules do not match (a send without a receive, different counts) or deadlock.
Prediction predict(const std::vector<sched::Schedule>& schedules, const Topology& topo, size_t elemSize,
                   const LinkModel& model);

/// Name of a link class ("self", "intra-host", "intra-switch", "inter-switch").
const char* linkClassName(hocclLinkClass_t c);

}  // namespace hoccl::topo
