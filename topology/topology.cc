// Topology: host and switch grouping from the ids every rank reported, synthetic shapes, and the level structure
// (hierarchy) that HO-Ring runs over.
//
// Level structure, with fallback level by level (never fails):
//   regular    every host has G ranks and every switch H hosts: levels (host: G, switch: H, spine: S)
//   uneven switches (equal hosts, switches with different host counts): (host: G, hosts: all hosts in one ring)
//   uneven hosts, equal ranks per switch M: (switch: M ranks of a switch in one ring, spine: S)
//   otherwise  one flat ring over all ranks, hosts and switches contiguous
// Levels of size 1 are dropped, so a 1x1xG job is a single host-level ring.
#include "topology/topology.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>

#include "base/error.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"

namespace hoccl::topo {

hocclLinkClass_t Topology::linkClass(int a, int b) const {
  if (a == b) return hocclLinkSelf;
  if (hostOf[a] == hostOf[b]) return hocclLinkIntraHost;
  if (switchOf[a] == switchOf[b]) return hocclLinkIntraSwitch;
  return hocclLinkInterSwitch;
}

namespace {
void orderHostsByGpuRing(Topology& t);
}  // namespace

Topology build(const std::vector<boot::RankInfo>& ranks) {
  Topology t;
  t.nranks = static_cast<int>(ranks.size());
  std::map<std::string, int> hosts, switches;
  std::map<int, int> perHost;
  std::vector<int> switchOfHost;
  for (const auto& r : ranks) {
    std::string hostId(r.hostId, strnlen(r.hostId, sizeof(r.hostId)));
    std::string switchId(r.switchId, strnlen(r.switchId, sizeof(r.switchId)));
    auto [hit, newHost] = hosts.emplace(hostId, static_cast<int>(hosts.size()));
    int h = hit->second;
    if (newHost) {
      auto sit = switches.emplace(switchId, static_cast<int>(switches.size())).first;
      if (sit->second == static_cast<int>(t.switchNames.size())) t.switchNames.push_back(switchId);
      switchOfHost.push_back(sit->second);
      t.hostNames.push_back(hostId);
    } else if (t.switchNames[switchOfHost[h]] != switchId) {
      HOCCL_WARN(kTopo, "rank {} on host '{}' reports switch '{}' but the host's first rank reported '{}'; using '{}'",
                 r.rank, hostId, switchId, t.switchNames[switchOfHost[h]], t.switchNames[switchOfHost[h]]);
    }
    t.hostOf.push_back(h);
    t.switchOf.push_back(switchOfHost[h]);
    t.localIndex.push_back(perHost[h]++);
    t.numaOf.push_back(r.numaNode);
    t.gpuRingOf.push_back(r.gpuRing);
  }
  t.nhosts = static_cast<int>(hosts.size());
  t.nswitches = static_cast<int>(t.switchNames.size());
  orderHostsByGpuRing(t);
  return t;
}

Topology fromCounts(const std::vector<std::vector<int>>& hostsRanks) {
  if (hostsRanks.empty()) throwInvalidArgument("topology shape has no switches");
  Topology t;
  for (size_t s = 0; s < hostsRanks.size(); ++s) {
    if (hostsRanks[s].empty()) throwInvalidArgument(fmt::format("topology shape: switch {} has no hosts", s));
    t.switchNames.push_back(fmt::format("s{}", s));
    for (size_t h = 0; h < hostsRanks[s].size(); ++h) {
      int g = hostsRanks[s][h];
      if (g <= 0) throwInvalidArgument(fmt::format("topology shape: host {} of switch {} has {} ranks", h, s, g));
      t.hostNames.push_back(fmt::format("s{}h{}", s, h));
      for (int l = 0; l < g; ++l) {
        t.hostOf.push_back(t.nhosts);
        t.switchOf.push_back(static_cast<int>(s));
        t.localIndex.push_back(l);
      }
      ++t.nhosts;
    }
  }
  t.nswitches = static_cast<int>(hostsRanks.size());
  t.nranks = static_cast<int>(t.hostOf.size());
  return t;
}

Topology fromShape(int switches, int hostsPerSwitch, int ranksPerHost) {
  if (switches <= 0 || hostsPerSwitch <= 0 || ranksPerHost <= 0)
    throwInvalidArgument(
        fmt::format("topology shape {}x{}x{}: every size must be positive", switches, hostsPerSwitch, ranksPerHost));
  return fromCounts(std::vector<std::vector<int>>(switches, std::vector<int>(hostsPerSwitch, ranksPerHost)));
}

std::string localHostId() {
  if (auto id = params::HOSTID.value()) return *id;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string bootId;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, bootId);
  return std::string(host) + ":" + bootId;
}

std::string localSwitchId(const std::string& hostId) {
  // Through the parameter registry, so that the NCCL shim's NCCL_TOPO_FILE is honoured too.
  if (auto topoFile = params::TOPO_FILE.value()) {
    const std::string& file = *topoFile;
    SwitchMap map = readTopologyFile(file);
    std::string s = map.switchOf(hostId);
    if (s.empty()) {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      s = map.switchOf(host);
    }
    if (!s.empty()) return s;
    HOCCL_WARN(kTopo, "host '{}' is not listed in HOCCL_TOPO_FILE={}; trying HOCCL_SWITCH_ID / SLURM_TOPOLOGY_ADDR",
               hostId, file);
  }
  if (auto id = params::SWITCH_ID.value()) return *id;
  if (const char* env = std::getenv("SLURM_TOPOLOGY_ADDR"); env && *env) {
    // "spine.leaf.node": the switch is everything before the last component.
    std::string addr = env;
    auto dot = addr.rfind('.');
    if (dot != std::string::npos) return addr.substr(0, dot);
  }
  // Unknown here. With HOCCL_TOPO_PROBE=1 the communicator measures the switches once every rank is connected
  // (src/comm/topo_probe.h); otherwise one flat switch.
  return "";
}

uint64_t hashId(const std::string& id) { return fnv1a(id); }

// ---- level structure ----------------------------------------------------------------------------------------

namespace {

struct Groups {
  std::vector<std::vector<int>> ranksOfHost;    // host -> ranks in rank order
  std::vector<std::vector<int>> hostsOfSwitch;  // switch -> hosts in order of first rank
};

Groups groups(const Topology& t) {
  Groups g;
  g.ranksOfHost.resize(t.nhosts);
  g.hostsOfSwitch.resize(t.nswitches);
  for (int r = 0; r < t.nranks; ++r) {
    auto& hr = g.ranksOfHost[t.hostOf[r]];
    if (hr.empty()) g.hostsOfSwitch[t.switchOf[r]].push_back(t.hostOf[r]);
    hr.push_back(r);
  }
  // Each host's ranks in the order of their index on the host (rank order unless a GPU ring renumbered them).
  for (auto& hr : g.ranksOfHost)
    std::stable_sort(hr.begin(), hr.end(), [&t](int a, int b) { return t.localIndex[a] < t.localIndex[b]; });
  return g;
}

bool gpuOrdered(const Topology& t, const std::vector<int>& ranksOfHost) {
  return !t.gpuRingOf.empty() &&
         std::all_of(ranksOfHost.begin(), ranksOfHost.end(), [&t](int r) { return t.gpuRingOf[r] >= 0; });
}

// Ranks of a host whose every rank sits on a GPU are numbered along the host's GPU ring (gpu_topology.h), so that
// the host's ring (level 0 of hierarchy(), and the flat ring) steps over the best GPU links.
void orderHostsByGpuRing(Topology& t) {
  for (auto& ranks : groups(t).ranksOfHost) {
    if (!gpuOrdered(t, ranks)) continue;
    std::stable_sort(ranks.begin(), ranks.end(), [&t](int a, int b) { return t.gpuRingOf[a] < t.gpuRingOf[b]; });
    for (size_t i = 0; i < ranks.size(); ++i) t.localIndex[ranks[i]] = static_cast<int>(i);
  }
}

template <class V>
bool allSameSize(const std::vector<V>& v) {
  return std::all_of(v.begin(), v.end(), [&](const V& x) { return x.size() == v.front().size(); });
}

// Fills rankAt from coord and drops levels of size 1.
void finish(Hierarchy& h, int nranks) {
  for (int lv = h.levels() - 1; lv >= 0; --lv) {
    if (h.sizes[lv] > 1) continue;
    h.sizes.erase(h.sizes.begin() + lv);
    h.names.erase(h.names.begin() + lv);
    for (auto& c : h.coord) c.erase(c.begin() + lv);
  }
  h.rankAt.assign(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    size_t idx = 0, mul = 1;
    for (int lv = 0; lv < h.levels(); ++lv) {
      idx += h.coord[r][lv] * mul;
      mul *= h.sizes[lv];
    }
    h.rankAt[idx] = r;
  }
}

}  // namespace

int Hierarchy::neighbour(int rank, int level, int value) const {
  size_t idx = 0, mul = 1;
  for (int lv = 0; lv < levels(); ++lv) {
    idx += static_cast<size_t>(lv == level ? value : coord[rank][lv]) * mul;
    mul *= sizes[lv];
  }
  return rankAt[idx];
}

std::vector<int> flatRingOrder(const Topology& t) {
  Groups g = groups(t);
  std::vector<int> order;
  auto numa = [&t](int r) { return t.numaOf.empty() ? 0 : t.numaOf[r]; };
  for (const auto& hosts : g.hostsOfSwitch) {
    for (int host : hosts) {
      // Inside a host, ranks of one NUMA node sit next to each other: the ring crosses the socket link least.
      // Ranks on GPUs keep their GPU ring order, which already weighs the socket link.
      std::vector<int> ranks = g.ranksOfHost[host];
      if (!gpuOrdered(t, ranks))
        std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) { return numa(a) < numa(b); });
      order.insert(order.end(), ranks.begin(), ranks.end());
    }
  }
  return order;
}

Hierarchy hierarchy(const Topology& t) {
  Hierarchy h;
  h.coord.assign(t.nranks, {});
  if (t.nranks <= 0) return h;
  Groups g = groups(t);
  bool evenHosts = allSameSize(g.ranksOfHost);
  bool evenSwitches = allSameSize(g.hostsOfSwitch);
  if (evenHosts && evenSwitches) {
    h.sizes = {static_cast<int>(g.ranksOfHost[0].size()), static_cast<int>(g.hostsOfSwitch[0].size()), t.nswitches};
    h.names = {"host", "switch", "spine"};
    h.note = "regular";
    for (int s = 0; s < t.nswitches; ++s)
      for (size_t hp = 0; hp < g.hostsOfSwitch[s].size(); ++hp)
        for (int r : g.ranksOfHost[g.hostsOfSwitch[s][hp]]) h.coord[r] = {t.localIndex[r], static_cast<int>(hp), s};
  } else if (evenHosts) {
    h.sizes = {static_cast<int>(g.ranksOfHost[0].size()), t.nhosts};
    h.names = {"host", "hosts"};
    h.note = "switches have different host counts: all hosts form one level";
    int hp = 0;
    for (const auto& hosts : g.hostsOfSwitch)
      for (int host : hosts) {
        for (int r : g.ranksOfHost[host]) h.coord[r] = {t.localIndex[r], hp};
        ++hp;
      }
  } else {
    std::vector<std::vector<int>> ranksOfSwitch(t.nswitches);
    for (int s = 0; s < t.nswitches; ++s)
      for (int host : g.hostsOfSwitch[s])
        ranksOfSwitch[s].insert(ranksOfSwitch[s].end(), g.ranksOfHost[host].begin(), g.ranksOfHost[host].end());
    if (allSameSize(ranksOfSwitch)) {
      h.sizes = {static_cast<int>(ranksOfSwitch[0].size()), t.nswitches};
      h.names = {"switch", "spine"};
      h.note = "hosts have different rank counts: the ranks of a switch form one level";
      for (int s = 0; s < t.nswitches; ++s)
        for (size_t i = 0; i < ranksOfSwitch[s].size(); ++i) h.coord[ranksOfSwitch[s][i]] = {static_cast<int>(i), s};
    } else {
      h.sizes = {t.nranks};
      h.names = {"all"};
      h.note = "hosts and switches are uneven: one flat ring (hosts and switches contiguous)";
      std::vector<int> order = flatRingOrder(t);
      for (size_t i = 0; i < order.size(); ++i) h.coord[order[i]] = {static_cast<int>(i)};
    }
  }
  finish(h, t.nranks);
  return h;
}

std::vector<std::vector<int>> levelRings(const Hierarchy& h, int level) {
  std::vector<std::vector<int>> rings;
  if (level < 0 || level >= h.levels()) return rings;
  for (size_t r = 0; r < h.coord.size(); ++r) {
    if (h.coord[r][level] != 0) continue;
    std::vector<int> ring;
    for (int v = 0; v < h.sizes[level]; ++v) ring.push_back(h.neighbour(static_cast<int>(r), level, v));
    rings.push_back(std::move(ring));
  }
  return rings;
}

}  // namespace hoccl::topo
