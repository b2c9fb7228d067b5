// PaRO layout: groups from the topology, shard ranges, redundancy groups, topology files for the tool.
#include "paro/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace hoccl::paro {

GroupLevel parseGroupLevel(const std::string& text) {
  std::string lower;
  for (char c : text) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "host" || lower == "node") return GroupLevel::Host;
  if (lower == "switch") return GroupLevel::Switch;
  throwInvalidArgument(fmt::format("PaRO group level '{}' is not valid: use 'host' (the default) or 'switch'", text));
}

const char* groupLevelName(GroupLevel level) { return level == GroupLevel::Switch ? "switch" : "host"; }

Layout makeLayout(const topo::Topology& topo, GroupLevel level) {
  Layout l;
  l.topo = topo;
  l.level = level;
  l.nranks = topo.nranks;
  const std::vector<int>& key = level == GroupLevel::Switch ? topo.switchOf : topo.hostOf;
  std::map<int, int> groupIndex;  // topology index -> group number, in order of first rank
  std::vector<std::vector<int>> members;
  for (int r = 0; r < topo.nranks; ++r) {
    auto it = groupIndex.emplace(key.at(r), static_cast<int>(members.size())).first;
    if (it->second == static_cast<int>(members.size())) members.emplace_back();
    members[it->second].push_back(r);
  }
  bool regular = !members.empty();
  for (const auto& g : members) regular = regular && g.size() == members[0].size();
  if (!regular && topo.nranks > 0) {
    l.note = fmt::format(
        "the {}s do not all hold the same number of ranks, so PaRO uses groups of one rank "
        "(I behaves like N; G still shards over all {} ranks)",
        groupLevelName(level), topo.nranks);
    members.clear();
    for (int r = 0; r < topo.nranks; ++r) members.push_back({r});
  }
  l.members = std::move(members);
  l.ngroups = static_cast<int>(l.members.size());
  l.groupSize = l.ngroups ? static_cast<int>(l.members[0].size()) : 1;
  l.groupOf.assign(l.nranks, 0);
  l.localOf.assign(l.nranks, 0);
  for (int g = 0; g < l.ngroups; ++g)
    for (int k = 0; k < l.groupSize; ++k) {
      l.groupOf[l.members[g][k]] = g;
      l.localOf[l.members[g][k]] = k;
    }
  return l;
}

topo::Topology regularTopology(int nranks, int ranksPerHost, int hostsPerSwitch) {
  if (nranks < 1 || ranksPerHost < 1 || nranks % ranksPerHost != 0)
    throwInvalidArgument(
        fmt::format("cannot lay out {} ranks in hosts of {} ranks: the rank count must be a positive "
                    "multiple of the ranks per host",
                    nranks, ranksPerHost));
  const int nhosts = nranks / ranksPerHost;
  if (hostsPerSwitch < 0 || (hostsPerSwitch > 0 && nhosts % hostsPerSwitch != 0))
    throwInvalidArgument(fmt::format("cannot lay out {} hosts in switches of {} hosts", nhosts, hostsPerSwitch));
  topo::Topology t;
  t.nranks = nranks;
  t.nhosts = nhosts;
  t.nswitches = hostsPerSwitch > 0 ? nhosts / hostsPerSwitch : 1;
  for (int r = 0; r < nranks; ++r) {
    const int h = r / ranksPerHost;
    t.hostOf.push_back(h);
    t.switchOf.push_back(hostsPerSwitch > 0 ? h / hostsPerSwitch : 0);
    t.localIndex.push_back(r % ranksPerHost);
  }
  return t;
}

namespace {

// Appends one host's ranks to t.
void addHost(topo::Topology& t, int sw, int ranks) {
  for (int i = 0; i < ranks; ++i) {
    t.hostOf.push_back(t.nhosts);
    t.switchOf.push_back(sw);
    t.localIndex.push_back(i);
  }
  t.nranks += ranks;
  t.nhosts += 1;
}

void addHosts(topo::Topology& t, int sw, const nlohmann::json& hosts, int defaultRanks, const std::string& path) {
  if (!hosts.is_array())
    throwInvalidArgument(fmt::format("topology file {}: the hosts of a switch must be a list", path));
  for (const auto& h : hosts) {
    int ranks = defaultRanks;
    if (h.is_object()) ranks = h.value("ranks", defaultRanks);
    else if (!h.is_string())
      throwInvalidArgument(fmt::format("topology file {}: a host is a name or {{\"name\": ..., \"ranks\": n}}", path));
    if (ranks < 1)
      throwInvalidArgument(
          fmt::format("topology file {}: a host needs at least one rank (give \"ranks\" or "
                      "--group-size)",
                      path));
    addHost(t, sw, ranks);
  }
}

}  // namespace

topo::Topology topologyFromFile(const std::string& path, int defaultRanksPerHost) {
  std::ifstream in(path);
  if (!in) throwInvalidArgument(fmt::format("cannot open topology file {}", path));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throwInvalidArgument(fmt::format("topology file {} is not valid JSON: {}", path, e.what()));
  }
  if (!doc.is_object() || !doc.contains("switches"))
    throwInvalidArgument(fmt::format("topology file {} needs a \"switches\" entry (switches -> hosts)", path));
  topo::Topology t;
  const auto& sw = doc["switches"];
  try {
    if (sw.is_object()) {
      for (const auto& [name, hosts] : sw.items()) addHosts(t, t.nswitches++, hosts, defaultRanksPerHost, path);
    } else if (sw.is_array()) {
      for (const auto& s : sw) {
        if (!s.is_object() || !s.contains("hosts"))
          throwInvalidArgument(fmt::format("topology file {}: each switch needs \"hosts\"", path));
        addHosts(t, t.nswitches++, s["hosts"], defaultRanksPerHost, path);
      }
    } else {
      throwInvalidArgument(fmt::format("topology file {}: \"switches\" must be a list or an object", path));
    }
  } catch (const nlohmann::json::exception& e) {
    throwInvalidArgument(fmt::format("topology file {}: {}", path, e.what()));
  }
  if (t.nranks == 0) throwInvalidArgument(fmt::format("topology file {} describes no ranks", path));
  return t;
}

uint64_t paddedCount(uint64_t count, int nranks) {
  const uint64_t n = static_cast<uint64_t>(std::max(nranks, 1));
  return (count + n - 1) / n * n;
}

int shardCount(const Layout& layout, Level level) {
  switch (level) {
    case Level::N: return 1;
    case Level::I: return layout.groupSize;
    case Level::G: return layout.nranks;
  }
  return 1;
}

int shardIndex(const Layout& layout, Level level, int rank) {
  switch (level) {
    case Level::N: return 0;
    case Level::I: return layout.localOf.at(rank);
    case Level::G: return layout.localOf.at(rank) * layout.ngroups + layout.groupOf.at(rank);
  }
  return 0;
}

Range shardRange(const Layout& layout, Level level, int rank, uint64_t count) {
  const uint64_t padded = paddedCount(count, layout.nranks);
  const uint64_t len = padded / static_cast<uint64_t>(shardCount(layout, level));
  const uint64_t idx = static_cast<uint64_t>(shardIndex(layout, level, rank));
  return Range{idx * len, (idx + 1) * len};
}

Range shardRangeUnpadded(const Layout& layout, Level level, int rank, uint64_t count) {
  Range r = shardRange(layout, level, rank, count);
  r.begin = std::min(r.begin, count);
  r.end = std::min(r.end, count);
  return r;
}

std::vector<std::vector<int>> sameShardGroups(const Layout& layout, Level level) {
  std::vector<std::vector<int>> out;
  if (level == Level::N) {
    out.emplace_back();
    for (const auto& g : layout.members) out[0].insert(out[0].end(), g.begin(), g.end());
  } else if (level == Level::I) {
    for (int k = 0; k < layout.groupSize; ++k) {
      out.emplace_back();
      for (int g = 0; g < layout.ngroups; ++g) out.back().push_back(layout.rankAt(g, k));
    }
  } else {
    for (int k = 0; k < layout.groupSize; ++k)
      for (int g = 0; g < layout.ngroups; ++g) out.push_back({layout.rankAt(g, k)});
  }
  return out;
}

}  // namespace hoccl::paro
