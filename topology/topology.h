/// @file topology.h
/// The shape of a communicator: which ranks share a host, which hosts share a switch, and the link class between
/// any two ranks. Built once at init from every rank's RankInfo (host id, switch id) plus, where configured, a
/// topology file, Slurm's variables or a bandwidth probe. Also: the level structure (hierarchy()) that HO-Ring and
/// the cost model walk, with a fallback level by level for uneven shapes, and the rings of every level.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/boot/bootstrap.h"
#include "hoccl/hoccl.h"

namespace hoccl::topo {

/// The levels of a communicator: rank -> host -> switch.
struct Topology {
  int nranks = 0;                        ///< ranks in the communicator
  int nhosts = 0;                        ///< distinct hosts, numbered in order of their first rank
  int nswitches = 0;                     ///< distinct switches, numbered in order of their first rank
  std::vector<int> hostOf;               ///< rank -> host index
  std::vector<int> switchOf;             ///< rank -> switch index
  std::vector<int> localIndex;           ///< rank -> index among the ranks of its host (in rank order)
  std::vector<int> numaOf;               ///< rank -> NUMA node it runs on (-1 unknown; empty for synthetic shapes)
  std::vector<int> gpuRingOf;            ///< rank -> its GPU's position in its host's GPU ring (-1 none; may be empty)
  std::vector<std::string> hostNames;    ///< host index -> host id as reported (may be empty for synthetic shapes)
  std::vector<std::string> switchNames;  ///< switch index -> switch id ("" = the default flat switch)
  /// The link class between ranks a and b.
  hocclLinkClass_t linkClass(int a, int b) const;
};

/// Builds the topology from every rank's info (switch ids come from RankInfo::switchId, filled from the topology
/// file or environment by localSwitchId()). When every rank of a host sits on a GPU (RankInfo::gpuRing >= 0), the
/// host's ranks are numbered (localIndex) in the order of its GPU ring, ties (ranks sharing a GPU) by rank. Never fails: unknown switches mean one flat switch. A host whose ranks
/// reported different switch ids is put under the switch of its first rank (with a warning).
Topology build(const std::vector<boot::RankInfo>& ranks);

/// A synthetic regular topology: `switches` x `hostsPerSwitch` x `ranksPerHost`, ranks numbered switch-major
/// (rank = (s * hostsPerSwitch + h) * ranksPerHost + l). Throws InvalidArgument on a non-positive size.
Topology fromShape(int switches, int hostsPerSwitch, int ranksPerHost);
/// A synthetic topology from explicit ranks-per-host counts grouped by switch: hostsRanks[s][h] = ranks on host h
/// of switch s (uneven shapes for tests and hoccl-topo). Throws InvalidArgument on an empty or non-positive entry.
Topology fromCounts(const std::vector<std::vector<int>>& hostsRanks);

/// This host's id: HOCCL_HOSTID if set, else hostname + boot id.
std::string localHostId();
/// This rank's switch id: from HOCCL_TOPO_FILE (looked up by host id, then host name), HOCCL_SWITCH_ID,
/// SLURM_TOPOLOGY_ADDR, or "" (unknown: one flat switch, unless HOCCL_TOPO_PROBE=1 makes the communicator measure
/// the switches once connected, see src/comm/topo_probe.h).
std::string localSwitchId(const std::string& hostId);
/// A stable 64-bit hash of an id string: FNV-1a (base/hash.h), the same on every rank and host.
uint64_t hashId(const std::string& id);

/// The level structure used by HO-Ring: every rank has one coordinate per level, level 0 innermost, and the
/// coordinates form a full mixed-radix product (sizes[0] * sizes[1] * ... == nranks), so that at every level the
/// ranks agreeing on all other coordinates form rings of equal length. Levels of size 1 are dropped.
struct Hierarchy {
  std::vector<int> sizes;               ///< ranks per ring at each level (each >= 2), innermost first
  std::vector<std::string> names;       ///< what each level spans: "host", "switch", "hosts", "switches", "all"
  std::vector<std::vector<int>> coord;  ///< rank -> coordinate per level
  std::vector<int> rankAt;              ///< mixed-radix index (level 0 fastest) -> rank
  std::string note;                     ///< how it was derived ("regular", or which fallback and why)
  /// Number of levels.
  int levels() const { return static_cast<int>(sizes.size()); }
  /// The rank whose coordinates equal those of `rank` except at `level`, where it is `value`.
  int neighbour(int rank, int level, int value) const;
};

/// The level structure of topo: host, switch and spine levels when every host has the same rank count and every
/// switch the same host count; otherwise levels are merged (hosts of uneven switches become one level; ranks of
/// uneven hosts become one level per switch), down to one flat level. Never fails. Cost: O(nranks).
Hierarchy hierarchy(const Topology& topo);
/// The rings of one level, each listed in ring order (position = coordinate at that level).
std::vector<std::vector<int>> levelRings(const Hierarchy& h, int level);
/// A flat ring over all ranks with the ranks of a host contiguous and the hosts of a switch contiguous.
std::vector<int> flatRingOrder(const Topology& topo);

/// Parses a host list in Slurm syntax ("h[1-4,7],login,n[01-03]") into names. Throws InvalidArgument on bad syntax.
std::vector<std::string> expandHostList(const std::string& list);

/// Host -> switch map read from a topology file: JSON ({"switches": {"s1": ["h1", ...], ...}} or
/// {"switches": [{"name": "s1", "hosts": [...]}]}) or Slurm topology.conf ("SwitchName=s1 Nodes=h[1-4]").
struct SwitchMap {
  std::vector<std::string> switches;                            ///< switch names in file order
  std::vector<std::pair<std::string, std::string>> hostSwitch;  ///< (host, switch) in file order
  /// The switch of host (exact match, then the part of host before ':' or '.'), or "" if not listed.
  std::string switchOf(const std::string& host) const;
};
/// Reads a topology file. Throws InvalidArgument naming the file and the problem.
SwitchMap readTopologyFile(const std::string& path);
/// Parses the text of a topology file (JSON when its first non-blank character is '{', else Slurm); `origin` names
/// it in messages. Throws InvalidArgument naming the origin and the problem.
SwitchMap parseTopologyText(const std::string& text, const std::string& origin);
/// A topology from a switch map with `ranksPerHost` ranks on every listed host, in file order.
Topology fromSwitchMap(const SwitchMap& map, int ranksPerHost);

}  // namespace hoccl::topo
