// A host's GPUs and NICs (see gpu_topology.h): the recorded file, the ring order over GPUs, the NIC per GPU.
//
// Ring order. A ring's bandwidth is that of its slowest hop, so the order minimises the sum of per-hop costs where
// each link class costs more than a whole ring of the next better class (cost = kClassWeight^class, with the number
// of GPUs below kClassWeight): one SYS hop outweighs any number of PHB hops, and so on. NVLink hops cost less the
// more links they have. Up to 16 GPUs the minimum is exact, by dynamic programming over the subsets of GPUs visited
// (Held-Karp: 2^n * n states, n^2 * 2^n steps, about 16 M for 16 GPUs); above, a greedy walk to the cheapest
// unvisited GPU.
//
// NIC choice. GPUs in index order each take the best-linked NIC; among equally linked NICs, the one with the fewest
// GPUs so far (so two GPUs under one PCIe switch with two NICs get one each), then the lowest index.
#include "topology/gpu_topology.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace hoccl::topo {
namespace {

constexpr double kClassWeight = 64;  // > the number of GPUs of any host: one worse hop outweighs a ring of better
constexpr int kExactLimit = 16;      // GPUs up to which the ring order is exact

LinkInfo parseLink(const std::string& word, bool nvlinkAllowed, const std::string& where) {
  static const std::pair<const char*, DeviceLink> kWords[] = {{"PIX", DeviceLink::Pix},
                                                              {"PXB", DeviceLink::Pxb},
                                                              {"PHB", DeviceLink::Phb},
                                                              {"NODE", DeviceLink::Node},
                                                              {"SYS", DeviceLink::Sys}};
  for (auto& [name, kind] : kWords)
    if (word == name) return LinkInfo{kind, 0};
  if (word.size() > 2 && word.compare(0, 2, "NV") == 0 &&
      std::all_of(word.begin() + 2, word.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (!nvlinkAllowed) throwInvalidArgument(fmt::format("{}: \"{}\": NVLink connects GPUs only", where, word));
    const int n = std::stoi(word.substr(2));
    if (n < 1 || n > 64) throwInvalidArgument(fmt::format("{}: \"{}\": NVLink count out of range 1..64", where, word));
    return LinkInfo{DeviceLink::NvLink, n};
  }
  throwInvalidArgument(
      fmt::format("{}: unknown link \"{}\" (expected NV<n>, PIX, PXB, PHB, NODE or SYS, as nvidia-smi topo -m "
                  "prints them)",
                  where, word));
}

// The cost of one ring hop (see the file comment).
double hopCost(const LinkInfo& link) {
  if (link.kind == DeviceLink::NvLink) return 1.0 / (1 + link.nvlinks);  // < 1: better than any PCIe hop
  double c = 1;
  for (int k = 0; k < static_cast<int>(link.kind); ++k) c *= kClassWeight;
  return c;
}

std::vector<int> exactRing(const std::vector<std::vector<double>>& cost) {
  const int n = static_cast<int>(cost.size());
  const uint32_t full = (1u << n) - 1;
  const double inf = std::numeric_limits<double>::infinity();
  // best[mask][last]: cheapest path from GPU 0 through the GPUs of mask (which holds 0 and last), ending at last.
  std::vector<double> best((size_t{1} << n) * n, inf);
  std::vector<int8_t> prev((size_t{1} << n) * n, -1);
  auto at = [n](uint32_t mask, int last) { return static_cast<size_t>(mask) * n + last; };
  best[at(1, 0)] = 0;
  for (uint32_t mask = 1; mask <= full; mask += 2) {  // masks holding GPU 0
    for (int last = 0; last < n; ++last) {
      const double here = best[at(mask, last)];
      if (here == inf) continue;
      for (int next = 1; next < n; ++next) {
        if (mask & (1u << next)) continue;
        const uint32_t m2 = mask | (1u << next);
        const double c = here + cost[last][next];
        if (c < best[at(m2, next)]) {
          best[at(m2, next)] = c;
          prev[at(m2, next)] = static_cast<int8_t>(last);
        }
      }
    }
  }
  int last = 0;
  double total = inf;
  for (int k = 1; k < n; ++k) {
    const double c = best[at(full, k)] + cost[k][0];
    if (c < total) total = c, last = k;
  }
  std::vector<int> order;
  uint32_t mask = full;
  while (last >= 0) {
    order.push_back(last);
    const int p = prev[at(mask, last)];
    mask &= ~(1u << last);
    last = p;
  }
  std::reverse(order.begin(), order.end());
  return order;
}

std::vector<int> greedyRing(const std::vector<std::vector<double>>& cost) {
  const int n = static_cast<int>(cost.size());
  std::vector<bool> used(n, false);
  std::vector<int> order{0};
  used[0] = true;
  while (static_cast<int>(order.size()) < n) {
    const int from = order.back();
    int pick = -1;
    for (int k = 0; k < n; ++k)
      if (!used[k] && (pick < 0 || cost[from][k] < cost[from][pick])) pick = k;
    used[pick] = true;
    order.push_back(pick);
  }
  return order;
}

}  // namespace

std::string linkName(const LinkInfo& link) {
  switch (link.kind) {
    case DeviceLink::NvLink: return fmt::format("NV{}", link.nvlinks);
    case DeviceLink::Pix: return "PIX";
    case DeviceLink::Pxb: return "PXB";
    case DeviceLink::Phb: return "PHB";
    case DeviceLink::Node: return "NODE";
    case DeviceLink::Sys: return "SYS";
  }
  return "?";
}

GpuTopology parseGpuTopology(const std::string& text, const std::string& what) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throwInvalidArgument(fmt::format("GPU topology {}: not valid JSON: {}", what, e.what()));
  }
  GpuTopology topo;
  topo.source = what;
  try {
    for (const auto& g : doc.at("gpus"))
      topo.gpus.push_back(GpuDevice{g.value("bus_id", std::string()), g.value("numa", -1)});
    if (doc.contains("nics"))
      for (const auto& n : doc.at("nics"))
        topo.nics.push_back(
            NicDevice{n.at("name").get<std::string>(), n.value("numa", -1), n.value("netdev", std::string())});
  } catch (const nlohmann::json::exception& e) {
    throwInvalidArgument(
        fmt::format("GPU topology {}: {} (expected \"gpus\": [{{\"bus_id\", \"numa\"}}], "
                    "\"nics\": [{{\"name\", \"numa\"}}])",
                    what, e.what()));
  }
  const size_t g = topo.gpus.size(), n = topo.nics.size(), all = g + n;
  if (g == 0) throwInvalidArgument(fmt::format("GPU topology {}: no GPUs", what));
  if (!doc.contains("links") || !doc["links"].is_array() || doc["links"].size() != all)
    throwInvalidArgument(
        fmt::format("GPU topology {}: \"links\" must be a {}x{} matrix over the {} GPUs then the {} "
                    "NICs",
                    what, all, all, g, n));
  std::vector<std::vector<std::string>> words(all);
  for (size_t r = 0; r < all; ++r) {
    const auto& row = doc["links"][r];
    if (!row.is_array() || row.size() != all)
      throwInvalidArgument(fmt::format("GPU topology {}: row {} of \"links\" must have {} entries", what, r, all));
    for (size_t c = 0; c < all; ++c) {
      if (!row[c].is_string())
        throwInvalidArgument(fmt::format("GPU topology {}: links[{}][{}] is not a string", what, r, c));
      words[r].push_back(row[c].get<std::string>());
    }
  }
  auto label = [&](size_t i) { return i < g ? fmt::format("GPU{}", i) : topo.nics[i - g].name; };
  for (size_t r = 0; r < all; ++r) {
    if (words[r][r] != "X")
      throwInvalidArgument(
          fmt::format("GPU topology {}: links[{}][{}] ({} to itself) must be \"X\"", what, r, r, label(r)));
    for (size_t c = r + 1; c < all; ++c)
      if (words[r][c] != words[c][r])
        throwInvalidArgument(fmt::format("GPU topology {}: {} to {} is \"{}\" but {} to {} is \"{}\"", what, label(r),
                                         label(c), words[r][c], label(c), label(r), words[c][r]));
  }
  topo.gpuLinks.assign(g, std::vector<LinkInfo>(g));
  topo.nicLinks.assign(g, std::vector<LinkInfo>(n));
  for (size_t a = 0; a < g; ++a) {
    for (size_t b = 0; b < g; ++b)
      if (a != b)
        topo.gpuLinks[a][b] = parseLink(words[a][b], true,
                                        fmt::format("GPU topology {}: {} to {}", what, label(a), label(b)));
    for (size_t k = 0; k < n; ++k)
      topo.nicLinks[a][k] = parseLink(words[a][g + k], false,
                                      fmt::format("GPU topology {}: {} to {}", what, label(a), label(g + k)));
  }
  return topo;
}

GpuTopology loadGpuTopology(const std::string& path) {
  std::ifstream in(path);
  if (!in) throwInvalidArgument(fmt::format("GPU topology file {} cannot be read", path));
  std::stringstream text;
  text << in.rdbuf();
  return parseGpuTopology(text.str(), "file " + path);
}

std::vector<int> gpuRingOrder(const GpuTopology& topo) {
  const int n = static_cast<int>(topo.gpus.size());
  if (n <= 2) {
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    return order;
  }
  std::vector<std::vector<double>> cost(n, std::vector<double>(n, 0));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) cost[a][b] = hopCost(topo.gpuLinks[a][b]);
  return n <= kExactLimit ? exactRing(cost) : greedyRing(cost);
}

std::vector<int> nearestNics(const GpuTopology& topo) {
  const size_t g = topo.gpus.size(), n = topo.nics.size();
  std::vector<int> choice(g, -1);
  std::vector<int> users(n, 0);
  for (size_t a = 0; a < g; ++a) {
    int pick = -1;
    for (size_t k = 0; k < n; ++k) {
      if (pick < 0) {
        pick = static_cast<int>(k);
        continue;
      }
      const auto mine = topo.nicLinks[a][k].kind, best = topo.nicLinks[a][pick].kind;
      if (mine < best || (mine == best && users[k] < users[pick])) pick = static_cast<int>(k);
    }
    choice[a] = pick;
    if (pick >= 0) ++users[pick];
  }
  return choice;
}

std::string describeGpuTopology(const GpuTopology& topo) {
  const size_t g = topo.gpus.size(), n = topo.nics.size();
  std::vector<std::string> names;
  for (size_t i = 0; i < g; ++i) names.push_back(fmt::format("GPU{}", i));
  for (auto& nic : topo.nics) names.push_back(nic.name);
  size_t width = 5;
  for (auto& name : names) width = std::max(width, name.size() + 1);
  std::string out = fmt::format("GPU topology ({}): {} GPU(s), {} NIC(s)\n{:{}}", topo.source, g, n, "", width);
  for (auto& name : names) out += fmt::format("{:<{}}", name, width);
  out += "\n";
  for (size_t a = 0; a < g; ++a) {
    out += fmt::format("{:<{}}", names[a], width);
    for (size_t b = 0; b < g; ++b) out += fmt::format("{:<{}}", a == b ? "X" : linkName(topo.gpuLinks[a][b]), width);
    for (size_t k = 0; k < n; ++k) out += fmt::format("{:<{}}", linkName(topo.nicLinks[a][k]), width);
    out += "\n";
  }
  const auto order = gpuRingOrder(topo);
  std::map<std::string, int> hops;
  out += "ring order: ";
  for (size_t i = 0; i < order.size(); ++i) {
    out += fmt::format("GPU{} -> ", order[i]);
    if (order.size() > 1) ++hops[linkName(topo.gpuLinks[order[i]][order[(i + 1) % order.size()]])];
  }
  if (!order.empty()) out += fmt::format("GPU{}", order[0]);
  std::string hopText;
  for (auto& [name, count] : hops) hopText += fmt::format("{}{} {}", hopText.empty() ? "" : ", ", count, name);
  out += fmt::format(" (hops: {})\n", hopText.empty() ? "none" : hopText);
  const auto nic = nearestNics(topo);
  out += "NIC per GPU:";
  for (size_t a = 0; a < g; ++a)
    out += nic[a] < 0 ? fmt::format(" GPU{} none", a)
                      : fmt::format(" GPU{} {} ({})", a, topo.nics[nic[a]].name, linkName(topo.nicLinks[a][nic[a]]));
  out += "\n";
  if (!topo.peerAccess.empty()) {
    // Pairs CUDA refuses are listed; pairs it was not asked about (a GPU this process cannot see) are counted.
    std::string denied;
    int unknown = 0;
    for (size_t a = 0; a < g; ++a)
      for (size_t b = 0; b < g; ++b) {
        if (a == b || topo.peerAccess[a][b] == 1) continue;
        if (topo.peerAccess[a][b] == 0) denied += fmt::format(" GPU{}->GPU{}", a, b);
        else ++unknown;
      }
    out += fmt::format("CUDA peer access: {}{}\n", denied.empty() ? "no pair refused" : "refused for" + denied,
                       unknown ? fmt::format(" ({} pairs not known: GPUs this process does not see)", unknown) : "");
  }
  return out;
}

std::string gpuTopologyJson(const GpuTopology& topo) {
  nlohmann::json doc;
  const size_t g = topo.gpus.size(), n = topo.nics.size();
  for (const char* key : {"gpus", "links", "nic_of"}) doc[key] = nlohmann::json::array();
  doc["source"] = topo.source;
  for (auto& gpu : topo.gpus) doc["gpus"].push_back({{"bus_id", gpu.busId}, {"numa", gpu.numaNode}});
  doc["nics"] = nlohmann::json::array();
  for (auto& nic : topo.nics)
    doc["nics"].push_back({{"name", nic.name}, {"numa", nic.numaNode}, {"netdev", nic.netdev}});
  for (size_t a = 0; a < g + n; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (size_t b = 0; b < g + n; ++b) {
      if (a == b) row.push_back("X");
      else if (a < g && b < g) row.push_back(linkName(topo.gpuLinks[a][b]));
      else if (a < g) row.push_back(linkName(topo.nicLinks[a][b - g]));
      else if (b < g) row.push_back(linkName(topo.nicLinks[b][a - g]));
      else row.push_back("-");  // NIC to NIC: not used, not kept
    }
    doc["links"].push_back(row);
  }
  doc["ring"] = gpuRingOrder(topo);
  const auto nic = nearestNics(topo);
  for (size_t a = 0; a < g; ++a)
    doc["nic_of"].push_back(nic[a] < 0 ? nlohmann::json() : nlohmann::json(topo.nics[nic[a]].name));
  if (!topo.peerAccess.empty()) doc["peer_access"] = topo.peerAccess;
  return doc.dump(2) + "\n";
}

}  // namespace hoccl::topo
