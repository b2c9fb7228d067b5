/// @file layout.h
/// Where PaRO shards live: ranks arranged in groups (hosts or switches), and for each sharding level the element
/// range a rank holds and the ranks that hold the same bytes. Pure math over a topo::Topology, no communicator.
///
/// Block layout (our design; it makes every transition between levels one plain collective):
///   A buffer of C elements is padded to Cp = ceil(C/N)*N and cut into N blocks of b = Cp/N elements.
///   - N: every rank holds [0, Cp).
///   - I: local index k holds the I-shard [k*ng*b, (k+1)*ng*b) (ng = number of groups); the ng ranks with local
///        index k (one per group) form the redundancy group k.
///   - G: rank (group g, local index k) holds block k*ng + g, which lies inside its I-shard. So a reduce-scatter
///        inside the group (m ranks ordered by k) followed by one across groups (ng ranks ordered by g) lands
///        exactly on the G-shard, and the all-gathers retrace it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "paro/strategy.h"
#include "topology/topology.h"

namespace hoccl::paro {

/// What a PaRO group is.
enum class GroupLevel : unsigned char {
  Host = 0,    ///< the ranks of one host (default)
  Switch = 1,  ///< the ranks of all hosts under one switch
};

/// Parses "host" or "switch" (any case); throws InvalidArgument otherwise.
GroupLevel parseGroupLevel(const std::string& text);
/// "host" or "switch".
const char* groupLevelName(GroupLevel level);

/// Ranks arranged in equal groups.
struct Layout {
  topo::Topology topo;                    ///< the communicator's topology (for link classes)
  GroupLevel level = GroupLevel::Host;    ///< what a group is
  int nranks = 0;                         ///< N
  int groupSize = 1;                      ///< m: ranks per group
  int ngroups = 0;                        ///< N/m
  std::vector<int> groupOf;               ///< rank -> group index g (numbered by first rank)
  std::vector<int> localOf;               ///< rank -> local index k inside its group (rank order)
  std::vector<std::vector<int>> members;  ///< members[g][k] = rank
  std::string note;                       ///< why the layout fell back to groups of one rank, "" if it did not
  /// The rank at group g, local index k.
  int rankAt(int g, int k) const { return members[g][k]; }
};

/// Groups the ranks of topo by host or switch. Groups of unequal size cannot carry an I-shard: the layout then falls
/// back to groups of one rank (I behaves like N, G still shards over everyone) and says so in `note`.
Layout makeLayout(const topo::Topology& topo, GroupLevel level);

/// A regular topology: nranks ranks, ranksPerHost per host (contiguous), hostsPerSwitch hosts per switch
/// (0 = one switch). Throws InvalidArgument unless the sizes divide evenly.
topo::Topology regularTopology(int nranks, int ranksPerHost, int hostsPerSwitch);

/// A topology read from a JSON file: {"switches": [{"name": "s0", "hosts": ["h0", {"name": "h1", "ranks": 4}]}]}
/// or {"switches": {"s0": ["h0", "h1"], ...}} (switches -> hosts, the HOCCL_TOPO_FILE shape). A host without
/// "ranks" gets defaultRanksPerHost ranks. Throws InvalidArgument with the file name and what is wrong.
topo::Topology topologyFromFile(const std::string& path, int defaultRanksPerHost);

/// An element range [begin, end).
struct Range {
  uint64_t begin = 0;  ///< first element
  uint64_t end = 0;    ///< one past the last element
  /// Number of elements.
  uint64_t size() const { return end - begin; }
};

/// Count padded up to a multiple of nranks (the size of a full PaRO buffer).
uint64_t paddedCount(uint64_t count, int nranks);
/// Number of distinct shards at a level: 1, m or N.
int shardCount(const Layout& layout, Level level);
/// The shard a rank holds at a level: 0 for N, k for I, k*ng+g for G.
int shardIndex(const Layout& layout, Level level, int rank);
/// The element range (in the padded buffer of paddedCount(count) elements) that rank holds at level.
Range shardRange(const Layout& layout, Level level, int rank, uint64_t count);
/// shardRange clipped to the real count (the padding removed; may be empty).
Range shardRangeUnpadded(const Layout& layout, Level level, int rank, uint64_t count);
/// The sets of ranks that hold identical shards at a level (N: everybody; I: one set per local index, the
/// redundancy groups; G: each rank alone), each in group order.
std::vector<std::vector<int>> sameShardGroups(const Layout& layout, Level level);

}  // namespace hoccl::paro
