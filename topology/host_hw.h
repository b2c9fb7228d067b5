/// @file host_hw.h
/// What is inside one host, from hwloc: NUMA nodes, cores, and the PCI devices that matter for collectives (GPUs and
/// NICs) with their NUMA locality. Used to order ranks on a host, to pick the NIC nearest to a rank, and by hoccl-topo.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hoccl::topo {

/// One PCI device of interest.
struct PciDevice {
  std::string kind;   ///< "gpu", "nic" or "other"
  std::string name;   ///< OS name ("eth0", "mlx5_0", "cuda0") or the PCI name
  std::string busId;  ///< "0000:3b:00.0"
  int numaNode = -1;  ///< the NUMA node it hangs off (-1 = unknown)
};

/// A summary of one host.
struct HostHardware {
  int numaNodes = 0;  ///< NUMA nodes (at least 1 once discovered)
  int cores = 0;      ///< physical cores
  int pus = 0;        ///< hardware threads
  /// Bytes of the level-2 cache one core has (the L2 above the first PU, divided among the cores it serves);
  /// 0 when hwloc does not say.
  size_t l2BytesPerCore = 0;
  /// Bytes of last-level cache on the host (the sum over the caches of the deepest level found: every L3, or every
  /// L2 where there is no L3); 0 when hwloc does not say.
  size_t llcBytes = 0;
  std::vector<PciDevice> devices;  ///< GPUs and NICs found (others omitted)
  int currentNuma = -1;            ///< NUMA node of the CPU the discovering thread last ran on (-1 = unknown)
  std::string error;               ///< non-empty when hwloc could not be used (then only counts from sysconf)
  /// The NIC nearest to NUMA node `numa` (same node first, then any), or "" when there is none.
  std::string nearestNic(int numa) const;
};

/// Discovers this host with hwloc (I/O devices included). Never throws: on failure, error says why.
HostHardware discoverHost();
/// The NIC this process's rank should use: the NIC nearest to its GPU when one was recorded (setGpuNic, by the
/// communicator of a rank that sits on a GPU), else thisHost().nearestNic() of the NUMA node it runs on.
std::string preferredNic();
/// Records the NIC nearest to this process's GPU (gpu_discovery.h's placeGpu), for preferredNic().
void setGpuNic(const std::string& name);

/// This process's host, discovered once (the first call pays hwloc's topology load; later calls are free).
/// currentNuma is that of the first caller's thread.
const HostHardware& thisHost();

}  // namespace hoccl::topo
