// Host discovery with hwloc: counts of NUMA nodes, cores and PUs, and the GPUs and NICs among the PCI devices with
// the NUMA node above each (their locality decides which NIC a rank should use).
#include "topology/host_hw.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>

#include "topology/hwloc_util.h"

namespace hoccl::topo {

std::string HostHardware::nearestNic(int numa) const {
  for (const auto& d : devices)
    if (d.kind == "nic" && d.numaNode == numa) return d.name;
  for (const auto& d : devices)
    if (d.kind == "nic") return d.name;
  return "";
}

namespace {

// The L2 one core has and the host's last-level cache (HostHardware::l2BytesPerCore, llcBytes).
void readCaches(hwloc_topology_t raw, HostHardware& hw) {
  hwloc_obj_t pu = hwloc_get_obj_by_type(raw, HWLOC_OBJ_PU, 0);
  for (hwloc_obj_t o = pu ? pu->parent : nullptr; o; o = o->parent)
    if (o->type == HWLOC_OBJ_L2CACHE && o->attr) {
      const int cores = std::max(1, hwloc_get_nbobjs_inside_cpuset_by_type(raw, o->cpuset, HWLOC_OBJ_CORE));
      hw.l2BytesPerCore = static_cast<size_t>(o->attr->cache.size) / static_cast<size_t>(cores);
      break;
    }
  for (hwloc_obj_type_t level : {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE}) {
    const int n = hwloc_get_nbobjs_by_type(raw, level);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t o = hwloc_get_obj_by_type(raw, level, static_cast<unsigned>(i));
      if (o->attr) hw.llcBytes += static_cast<size_t>(o->attr->cache.size);
    }
    if (hw.llcBytes > 0) break;
  }
}

}  // namespace

HostHardware discoverHost() {
  HostHardware hw;
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    hw.error = "hwloc_topology_init failed";
  } else {
    HwlocTopology topo(raw);
    hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(raw) != 0) {
      hw.error = "hwloc_topology_load failed";
    } else {
      hw.numaNodes = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE);
      hwloc_bitmap_t cpus = hwloc_bitmap_alloc(), nodes = hwloc_bitmap_alloc();
      if (cpus && nodes && hwloc_get_last_cpu_location(raw, cpus, HWLOC_CPUBIND_THREAD) == 0) {
        hwloc_cpuset_to_nodeset(raw, cpus, nodes);
        hw.currentNuma = hwloc_bitmap_first(nodes);
      }
      hwloc_bitmap_free(cpus);
      hwloc_bitmap_free(nodes);
      hw.cores = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
      hw.pus = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU);
      readCaches(raw, hw);
      for (hwloc_obj_t os = hwloc_get_next_osdev(raw, nullptr); os; os = hwloc_get_next_osdev(raw, os)) {
        PciDevice d;
        auto type = os->attr->osdev.type;
        if (type == HWLOC_OBJ_OSDEV_NETWORK || type == HWLOC_OBJ_OSDEV_OPENFABRICS) d.kind = "nic";
        else if (type == HWLOC_OBJ_OSDEV_GPU || type == HWLOC_OBJ_OSDEV_COPROC) d.kind = "gpu";
        else continue;
        d.name = os->name ? os->name : "";
        hwloc_obj_t pci = os->parent;
        while (pci && pci->type != HWLOC_OBJ_PCI_DEVICE) pci = pci->parent;
        if (pci) d.busId = pciBusId(pci);
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(raw, os);
        if (anc && anc->nodeset) {
          int node = hwloc_bitmap_first(anc->nodeset);
          if (hwloc_bitmap_weight(anc->nodeset) == 1 || hw.numaNodes <= 1) d.numaNode = node;
        }
        hw.devices.push_back(d);
      }
    }
  }
  if (hw.numaNodes <= 0) hw.numaNodes = 1;
  if (hw.pus <= 0) hw.pus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (hw.cores <= 0) hw.cores = hw.pus;
  return hw;
}

namespace {
std::mutex gpuNicMutex;
std::string gpuNic;  // guarded by gpuNicMutex
}  // namespace

std::string preferredNic() {
  {
    std::lock_guard<std::mutex> lock(gpuNicMutex);
    if (!gpuNic.empty()) return gpuNic;
  }
  return thisHost().nearestNic(thisHost().currentNuma);
}

void setGpuNic(const std::string& name) {
  std::lock_guard<std::mutex> lock(gpuNicMutex);
  gpuNic = name;
}

const HostHardware& thisHost() {
  static const HostHardware& hw = *new HostHardware(discoverHost());  // never destroyed: read by detached threads
  return hw;
}

}  // namespace hoccl::topo
