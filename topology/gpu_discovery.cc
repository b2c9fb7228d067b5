// A host's GPU topology from the live machine (gpu_discovery.h): hwloc's PCI tree read here, the CUDA driver's and
// NVML's facts handed in.
//
// PCIe class between two devices of the tree (nvidia-smi's words): walk both up to their lowest common ancestor.
// No common ancestor (different host bridges): NODE when both hang off the same NUMA node, else SYS. The common
// ancestor is a host bridge: PHB. It is a PCIe bridge: PIX when each device is at most one bridge below it (the two
// sit on the same switch: its upstream port is the common ancestor, each device behind one downstream port), else
// PXB (a hierarchy of switches).
//
// GPU to GPU: NVLink when NVML counts links between the two (direct links, or both GPUs on NVSwitches: the smaller
// of their switch link counts, as nvidia-smi prints NV18 on an H100 NVSwitch machine); otherwise NVML's common
// ancestor level when it answered, otherwise the tree's class, otherwise (a GPU missing from the tree) NODE or SYS
// by NUMA node.
#include "topology/gpu_discovery.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "topology/hwloc_util.h"

namespace hoccl::topo {
namespace {

int numaOf(hwloc_topology_t topo, hwloc_obj_t obj, int numaNodes) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (!anc || !anc->nodeset) return -1;
  if (hwloc_bitmap_weight(anc->nodeset) == 1 || numaNodes <= 1) return hwloc_bitmap_first(anc->nodeset);
  return -1;
}

bool isPciObject(hwloc_obj_t o) { return o && (o->type == HWLOC_OBJ_BRIDGE || o->type == HWLOC_OBJ_PCI_DEVICE); }

// The ancestors of node (itself first) up to the top of its tree.
std::vector<int> pathUp(const PciTree& tree, int node) {
  std::vector<int> path;
  for (int n = node; n >= 0 && path.size() <= tree.nodes.size(); n = tree.nodes[n].parent) path.push_back(n);
  return path;
}

DeviceLink byNuma(int a, int b) { return a >= 0 && a == b ? DeviceLink::Node : DeviceLink::Sys; }

DeviceLink fromNvmlLevel(int level) {
  if (level <= 10) return DeviceLink::Pix;  // NVML_TOPOLOGY_INTERNAL (0) or SINGLE (10)
  if (level <= 20) return DeviceLink::Pxb;  // MULTIPLE
  if (level <= 30) return DeviceLink::Phb;  // HOSTBRIDGE
  if (level <= 40) return DeviceLink::Node;
  return DeviceLink::Sys;
}

}  // namespace

std::string normaliseBusId(const std::string& busId) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(busId.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) == 4)
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, fn);
  if (std::sscanf(busId.c_str(), "%x:%x.%x", &bus, &dev, &fn) == 3)
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", 0u, bus, dev, fn);
  return "";
}

int PciTree::find(const std::string& busId) const {
  const std::string want = normaliseBusId(busId);
  if (want.empty()) return -1;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].hostBridge && nodes[i].busId == want) return static_cast<int>(i);
  return -1;
}

PciTree readPciTree() {
  PciTree tree;
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    tree.error = "hwloc_topology_init failed";
    return tree;
  }
  HwlocTopology owner(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(raw) != 0) {
    tree.error = "hwloc_topology_load failed";
    return tree;
  }
  const int numaNodes = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE);
  std::map<hwloc_obj_t, int> index;
  std::vector<hwloc_obj_t> objs;
  for (hwloc_obj_t o = hwloc_get_next_bridge(raw, nullptr); o; o = hwloc_get_next_bridge(raw, o)) objs.push_back(o);
  for (hwloc_obj_t o = hwloc_get_next_pcidev(raw, nullptr); o; o = hwloc_get_next_pcidev(raw, o)) objs.push_back(o);
  for (hwloc_obj_t o : objs) {
    PciTree::Node n;
    n.hostBridge = o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
    if (!n.hostBridge) n.busId = pciBusId(o);
    n.numaNode = numaOf(raw, o, numaNodes);
    index[o] = static_cast<int>(tree.nodes.size());
    tree.nodes.push_back(n);
  }
  for (hwloc_obj_t o : objs)
    if (isPciObject(o->parent)) tree.nodes[index[o]].parent = index[o->parent];
  // NICs: one per PCI function; its OpenFabrics name (mlx5_0) wins over its network interface name (eth0).
  std::map<int, size_t> nicOfNode;
  for (hwloc_obj_t os = hwloc_get_next_osdev(raw, nullptr); os; os = hwloc_get_next_osdev(raw, os)) {
    const auto type = os->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
    if (!os->parent || os->parent->type != HWLOC_OBJ_PCI_DEVICE || !os->name) continue;
    const int node = index[os->parent];
    auto it = nicOfNode.find(node);
    if (it == nicOfNode.end()) {
      it = nicOfNode.emplace(node, tree.nics.size()).first;
      tree.nics.push_back({os->name, node, ""});
    } else if (type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      tree.nics[it->second].name = os->name;
    }
    if (type == HWLOC_OBJ_OSDEV_NETWORK) tree.nics[it->second].netdev = os->name;
  }
  return tree;
}

DeviceLink pciLink(const PciTree& tree, int a, int b) {
  const std::vector<int> up = pathUp(tree, a), other = pathUp(tree, b);
  for (size_t da = 0; da < up.size(); ++da) {
    auto hit = std::find(other.begin(), other.end(), up[da]);
    if (hit == other.end()) continue;
    const size_t db = static_cast<size_t>(hit - other.begin());
    if (tree.nodes[up[da]].hostBridge) return DeviceLink::Phb;
    // Bridges strictly between the common ancestor and each device: da - 1 and db - 1.
    return std::max(da, db) <= 2 ? DeviceLink::Pix : DeviceLink::Pxb;
  }
  return byNuma(tree.nodes[a].numaNode, tree.nodes[b].numaNode);
}

GpuTopology buildGpuTopology(const GpuFacts& facts, const PciTree& tree) {
  GpuTopology topo;
  const size_t g = facts.busIds.size();
  auto known = [](const std::vector<std::vector<int>>& m, size_t a, size_t b) {
    return a < m.size() && b < m[a].size() ? m[a][b] : -1;
  };
  std::vector<int> node(g, -1);
  for (size_t i = 0; i < g; ++i) {
    node[i] = tree.find(facts.busIds[i]);
    const std::string id = normaliseBusId(facts.busIds[i]);
    topo.gpus.push_back({id.empty() ? facts.busIds[i] : id, node[i] >= 0 ? tree.nodes[node[i]].numaNode : -1});
  }
  topo.gpuLinks.assign(g, std::vector<LinkInfo>(g));
  for (size_t a = 0; a < g; ++a)
    for (size_t b = 0; b < g; ++b) {
      if (a == b) continue;
      LinkInfo& link = topo.gpuLinks[a][b];
      const int direct = std::max(known(facts.nvlinks, a, b), known(facts.nvlinks, b, a));
      const int viaSwitch = a < facts.nvswitchLinks.size() && b < facts.nvswitchLinks.size()
                                ? std::min(facts.nvswitchLinks[a], facts.nvswitchLinks[b])
                                : 0;
      const int level = known(facts.commonAncestor, a, b);
      if (direct > 0 || viaSwitch > 0) link = {DeviceLink::NvLink, std::max(direct, viaSwitch)};
      else if (level >= 0) link = {fromNvmlLevel(level), 0};
      else if (node[a] >= 0 && node[b] >= 0) link = {pciLink(tree, node[a], node[b]), 0};
      else link = {byNuma(topo.gpus[a].numaNode, topo.gpus[b].numaNode), 0};
    }
  topo.nicLinks.assign(g, {});
  for (const auto& nic : tree.nics) topo.nics.push_back({nic.name, tree.nodes[nic.node].numaNode, nic.netdev});
  for (size_t a = 0; a < g; ++a)
    for (size_t k = 0; k < tree.nics.size(); ++k)
      topo.nicLinks[a].push_back({node[a] >= 0 ? pciLink(tree, node[a], tree.nics[k].node)
                                               : byNuma(topo.gpus[a].numaNode, topo.nics[k].numaNode),
                                  0});
  if (!facts.peerAccess.empty()) {
    topo.peerAccess.assign(g, std::vector<int>(g, -1));
    for (size_t a = 0; a < g; ++a)
      for (size_t b = 0; b < g; ++b) topo.peerAccess[a][b] = a == b ? 1 : known(facts.peerAccess, a, b);
  }
  std::string source = "live:";
  for (const auto& s : facts.sources) source += " " + s + ";";
  source += tree.error.empty() ? fmt::format(" hwloc: {} PCI objects, {} NICs", tree.nodes.size(), tree.nics.size())
                               : " hwloc: " + tree.error;
  topo.source = source;
  return topo;
}

GpuPlacement placeGpu(const GpuTopology& topo, const std::string& busId) {
  GpuPlacement p;
  const std::string want = normaliseBusId(busId);
  for (size_t i = 0; i < topo.gpus.size(); ++i)
    if (!want.empty() && normaliseBusId(topo.gpus[i].busId) == want) p.gpu = static_cast<int>(i);
  if (p.gpu < 0) return p;
  const auto order = gpuRingOrder(topo);
  p.ringPosition = static_cast<int>(std::find(order.begin(), order.end(), p.gpu) - order.begin());
  p.nic = nearestNics(topo)[p.gpu];
  if (p.nic >= 0) p.nicName = topo.nics[p.nic].name;
  if (p.nic >= 0) p.nicNetdev = topo.nics[p.nic].netdev;
  return p;
}

}  // namespace hoccl::topo
