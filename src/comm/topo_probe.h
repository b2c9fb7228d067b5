/// @file topo_probe.h
/// The bandwidth probe (HOCCL_TOPO_PROBE=1): when no rank knows its switch, the first rank of every host (the host
/// leader) measures the bandwidth to every other host leader over the communicator's own channels, the matrix is
/// all-gathered, and hosts are grouped into switches "probe0", "probe1", ... by topo::clusterByBandwidth.
#pragma once

#include <vector>

#include "base/boot/bootstrap.h"
#include "topology/topology.h"

namespace hoccl {

class Communicator;

/// Whether the probe should run: HOCCL_TOPO_PROBE=1, no rank reported a switch id and there are >= 3 hosts. Depends
/// only on the all-gathered rank info and the environment, so every rank decides the same.
bool topoProbeWanted(const topo::Topology& topo, const std::vector<boot::RankInfo>& ranks);

/// Runs the probe over comm's channels (collective: every rank of comm calls it, after the channels are connected)
/// and returns comm's topology with the measured switches. Bounded in time (up to 3 x 4 MiB per host pair and
/// direction, one on a slow link); throws RemoteError naming the peer when a leader stops answering (HOCCL_TIMEOUT).
topo::Topology probeTopology(Communicator& comm);

}  // namespace hoccl
