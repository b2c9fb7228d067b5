// Text, JSON and DOT renderings of a topology and its HO-Ring levels.
#include "topology/dump.h"

#include <fmt/format.h>

#include <map>

namespace hoccl::topo {
namespace {

const char* kLevelColours[] = {"firebrick", "royalblue", "forestgreen", "darkorange", "purple"};

std::string hostName(const Topology& t, int h) {
  return h < static_cast<int>(t.hostNames.size()) && !t.hostNames[h].empty() ? t.hostNames[h]
                                                                             : fmt::format("host{}", h);
}
std::string switchName(const Topology& t, int s) {
  return s < static_cast<int>(t.switchNames.size()) && !t.switchNames[s].empty() ? t.switchNames[s]
                                                                                 : fmt::format("switch{}", s);
}

// switch -> host -> ranks, hosts and switches in order of first rank.
std::vector<std::vector<std::pair<int, std::vector<int>>>> layout(const Topology& t) {
  std::vector<std::vector<std::pair<int, std::vector<int>>>> out(t.nswitches);
  std::map<int, std::pair<int, size_t>> where;  // host -> (switch, index)
  for (int r = 0; r < t.nranks; ++r) {
    int h = t.hostOf[r], s = t.switchOf[r];
    auto it = where.find(h);
    if (it == where.end()) {
      it = where.emplace(h, std::make_pair(s, out[s].size())).first;
      out[s].push_back({h, {}});
    }
    out[it->second.first][it->second.second].second.push_back(r);
  }
  return out;
}

}  // namespace

std::string toText(const Topology& t, const HostHardware* hw, int maxRings) {
  std::string s = fmt::format("{} ranks, {} hosts, {} switches\n", t.nranks, t.nhosts, t.nswitches);
  auto lay = layout(t);
  for (int sw = 0; sw < t.nswitches; ++sw) {
    s += fmt::format("switch {} '{}': {} hosts\n", sw, switchName(t, sw), lay[sw].size());
    for (const auto& [h, ranks] : lay[sw])
      s += fmt::format("  host {} '{}': ranks {}\n", h, hostName(t, h), fmt::join(ranks, " "));
  }
  Hierarchy h = hierarchy(t);
  s += fmt::format("HO-Ring levels ({}): {}\n", h.note, h.levels() ? "" : "none (one rank)");
  for (int lv = 0; lv < h.levels(); ++lv) {
    auto rings = levelRings(h, lv);
    s += fmt::format("  level {} '{}': {} rings of {} ranks\n", lv, h.names[lv], rings.size(), h.sizes[lv]);
    for (size_t i = 0; i < rings.size() && static_cast<int>(i) < maxRings; ++i)
      s += fmt::format("    ring {}: {}\n", i, fmt::join(rings[i], " -> "));
    if (static_cast<int>(rings.size()) > maxRings) s += fmt::format("    ... {} more\n", rings.size() - maxRings);
  }
  std::vector<int> flat = flatRingOrder(t);
  if (flat.size() <= 64) {
    s += fmt::format("flat ring: {}\n", fmt::join(flat, " -> "));
  } else {
    flat.resize(64);
    s += fmt::format("flat ring: {} -> ... ({} ranks)\n", fmt::join(flat, " -> "), t.nranks);
  }
  if (hw) {
    s += fmt::format("this host: {} NUMA nodes, {} cores, {} hardware threads{}\n", hw->numaNodes, hw->cores, hw->pus,
                     hw->error.empty() ? "" : " (hwloc: " + hw->error + ")");
    for (const auto& d : hw->devices)
      s += fmt::format("  {} {} {} NUMA {}\n", d.kind, d.name, d.busId.empty() ? "-" : d.busId, d.numaNode);
  }
  return s;
}

nlohmann::json toJson(const Topology& t, const HostHardware* hw) {
  nlohmann::json j;
  j["nranks"] = t.nranks;
  j["nhosts"] = t.nhosts;
  j["nswitches"] = t.nswitches;
  auto lay = layout(t);
  j["switches"] = nlohmann::json::array();
  for (int sw = 0; sw < t.nswitches; ++sw) {
    nlohmann::json hosts = nlohmann::json::array();
    for (const auto& [h, ranks] : lay[sw]) hosts.push_back({{"index", h}, {"name", hostName(t, h)}, {"ranks", ranks}});
    j["switches"].push_back({{"index", sw}, {"name", switchName(t, sw)}, {"hosts", hosts}});
  }
  Hierarchy h = hierarchy(t);
  j["levels"] = nlohmann::json::array();
  for (int lv = 0; lv < h.levels(); ++lv)
    j["levels"].push_back({{"name", h.names[lv]}, {"size", h.sizes[lv]}, {"rings", levelRings(h, lv)}});
  j["hierarchy_note"] = h.note;
  j["flat_ring"] = flatRingOrder(t);
  if (hw) {
    nlohmann::json devs = nlohmann::json::array();
    for (const auto& d : hw->devices)
      devs.push_back({{"kind", d.kind}, {"name", d.name}, {"bus_id", d.busId}, {"numa", d.numaNode}});
    j["host_hardware"] = {{"numa_nodes", hw->numaNodes}, {"cores", hw->cores}, {"pus", hw->pus}, {"devices", devs}};
  }
  return j;
}

std::string toDot(const Topology& t) {
  std::string s = "digraph hoccl_topology {\n  compound=true; rankdir=LR; node [shape=circle, fontsize=10];\n";
  auto lay = layout(t);
  for (int sw = 0; sw < t.nswitches; ++sw) {
    s += fmt::format("  subgraph cluster_s{} {{\n    label=\"switch {}\"; style=rounded; color=gray40;\n", sw,
                     switchName(t, sw));
    for (const auto& [h, ranks] : lay[sw]) {
      s += fmt::format("    subgraph cluster_h{} {{\n      label=\"{}\"; style=filled; color=gray92;\n", h,
                       hostName(t, h));
      for (int r : ranks) s += fmt::format("      r{} [label=\"{}\"];\n", r, r);
      s += "    }\n";
    }
    s += "  }\n";
  }
  Hierarchy h = hierarchy(t);
  for (int lv = 0; lv < h.levels(); ++lv) {
    const char* colour = kLevelColours[lv % 5];
    for (const auto& ring : levelRings(h, lv))
      for (size_t i = 0; i < ring.size(); ++i) {
        int a = ring[i], b = ring[(i + 1) % ring.size()];
        if (ring.size() == 2 && i == 1) break;  // a 2-ring is one edge both ways
        s += fmt::format("  r{} -> r{} [color={}{}];\n", a, b, colour, ring.size() == 2 ? ", dir=both" : "");
      }
  }
  s += "  subgraph cluster_legend {\n    label=\"HO-Ring levels\"; style=dashed;\n";
  for (int lv = 0; lv < h.levels(); ++lv)
    s += fmt::format("    legend{} [shape=box, label=\"level {}: {} ({} ranks)\", color={}, fontcolor={}];\n", lv, lv,
                     h.names[lv], h.sizes[lv], kLevelColours[lv % 5], kLevelColours[lv % 5]);
  s += "  }\n}\n";
  return s;
}

}  // namespace hoccl::topo
