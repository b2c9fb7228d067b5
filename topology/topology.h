/// @file topology.h
/// The shape of a communicator: which ranks share a host, which hosts share a switch, and the link class between
/// any two ranks. Built once at init from every rank's RankInfo (host id, switch id) plus, where configured, a
/// topology file, Slurm's variables or a bandwidth probe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "boot/bootstrap.h"
#include "hoccl/hoccl.h"

namespace hoccl::topo {

/// The levels of a communicator: rank -> host -> switch.
struct Topology {
  int nranks = 0;                 ///< ranks in the communicator
  int nhosts = 0;                 ///< distinct hosts, numbered in order of their first rank
  int nswitches = 0;              ///< distinct switches, numbered in order of their first rank
  std::vector<int> hostOf;        ///< rank -> host index
  std::vector<int> switchOf;      ///< rank -> switch index
  std::vector<int> localIndex;    ///< rank -> index among the ranks of its host (in rank order)
  /// The link class between ranks a and b.
  hocclLinkClass_t linkClass(int a, int b) const;
};

/// Builds the topology from every rank's info (switch ids come from RankInfo::switchId, filled from the topology
/// file or environment by localSwitchId()). Never fails: unknown switches mean one flat switch.
Topology build(const std::vector<boot::RankInfo>& ranks);

/// This host's id: HOCCL_HOSTID if set, else hostname + boot id.
std::string localHostId();
/// This rank's switch id: from HOCCL_TOPO_FILE (looked up by host id), HOCCL_SWITCH_ID, SLURM_TOPOLOGY_ADDR, or "".
std::string localSwitchId(const std::string& hostId);
/// A stable 64-bit hash of an id string (FNV-1a).
uint64_t hashId(const std::string& id);

}  // namespace hoccl::topo
