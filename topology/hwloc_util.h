/// @file hwloc_util.h
/// Small helpers shared by the hwloc readers of topology/ (host_hw.cc, gpu_discovery.cc).
#pragma once

#include <hwloc.h>

#include <memory>
#include <string>

#include <fmt/format.h>

namespace hoccl::topo {

/// Destroys an hwloc topology (for std::unique_ptr).
struct HwlocTopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};

/// An hwloc topology owned by a unique_ptr.
using HwlocTopology = std::unique_ptr<hwloc_topology, HwlocTopologyDeleter>;

/// A PCI device's bus id as nvidia-smi and sysfs write it: "dddd:bb:dd.f" in lower-case hex.
inline std::string pciBusId(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", a.domain, a.bus, a.dev, a.func);
}

}  // namespace hoccl::topo
