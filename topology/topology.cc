// Minimal topology: host and switch grouping from the ids every rank reported. The topology owner extends it
// (topology file, Slurm, probe, hwloc).
#include "topology.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>

namespace hoccl::topo {

hocclLinkClass_t Topology::linkClass(int a, int b) const {
  if (a == b) return hocclLinkSelf;
  if (hostOf[a] == hostOf[b]) return hocclLinkIntraHost;
  if (switchOf[a] == switchOf[b]) return hocclLinkIntraSwitch;
  return hocclLinkInterSwitch;
}

Topology build(const std::vector<boot::RankInfo>& ranks) {
  Topology t;
  t.nranks = static_cast<int>(ranks.size());
  std::map<std::string, int> hosts, switches;
  std::map<int, int> perHost;
  for (const auto& r : ranks) {
    auto h = hosts.emplace(r.hostId, static_cast<int>(hosts.size())).first->second;
    auto s = switches.emplace(r.switchId, static_cast<int>(switches.size())).first->second;
    t.hostOf.push_back(h);
    t.switchOf.push_back(s);
    t.localIndex.push_back(perHost[h]++);
  }
  t.nhosts = static_cast<int>(hosts.size());
  t.nswitches = static_cast<int>(switches.size());
  return t;
}

std::string localHostId() {
  if (const char* env = std::getenv("HOCCL_HOSTID"); env && *env) return env;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string bootId;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, bootId);
  return std::string(host) + ":" + bootId;
}

std::string localSwitchId(const std::string&) {
  if (const char* env = std::getenv("HOCCL_SWITCH_ID"); env && *env) return env;
  if (const char* env = std::getenv("SLURM_TOPOLOGY_ADDR"); env && *env) {
    std::string addr = env;
    auto dot = addr.rfind('.');
    return dot == std::string::npos ? std::string() : addr.substr(0, dot);
  }
  return "";
}

uint64_t hashId(const std::string& id) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) { h ^= c; h *= 1099511628211ull; }
  return h;
}

}  // namespace hoccl::topo
