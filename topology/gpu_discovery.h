/// @file gpu_discovery.h
/// Builds a host's GpuTopology (gpu_topology.h) from the live machine. Two sources meet here:
/// - GpuFacts: what the GPU software stack says (the CUDA driver and NVML, both loaded at run time). topology/ does
///   not load drivers; the facts are gathered below this floor by kernels/cuda/gpu_query.h and handed over by
///   src/comm/gpu_host.cc (docs/architecture.md);
/// - PciTree: hwloc's PCI tree (host bridges, PCIe switches, devices, their NUMA nodes, the NICs), read here.
/// The link between two GPUs is NVLink when NVML counts links between them (directly or through NVSwitches), else
/// the PCIe class NVML reports (nvmlDeviceGetTopologyCommonAncestor), else the class read off hwloc's tree; the link
/// between a GPU and a NIC always comes from the tree.
#pragma once

#include <string>
#include <vector>

#include "topology/gpu_topology.h"

namespace hoccl::topo {

/// What the CUDA driver and NVML report about a host's GPUs (each matrix is over `gpus`; -1 = not known).
struct GpuFacts {
  std::vector<std::string> busIds;               ///< PCI bus id of each GPU ("0000:07:00.0", any hex case)
  std::vector<std::vector<int>> nvlinks;         ///< [a][b]: NVLinks directly between GPUs a and b (NVML)
  std::vector<int> nvswitchLinks;                ///< [g]: NVLinks from GPU g to NVSwitches (NVML)
  std::vector<std::vector<int>> commonAncestor;  ///< [a][b]: NVML's PCIe level (10 PIX ... 50 SYS), -1 unknown
  std::vector<std::vector<int>> peerAccess;      ///< [a][b]: cuDeviceCanAccessPeer (1/0), -1 unknown
  std::vector<std::string> sources;              ///< what answered ("CUDA driver: 8 GPUs", "NVML: 8 GPUs")
  std::vector<std::string> notes;                ///< what was missing and what that means
};

/// hwloc's PCI tree of this host: bridges and devices with their parents, and the NICs.
struct PciTree {
  /// A PCI bridge (host bridge or PCIe switch port) or device.
  struct Node {
    std::string busId;        ///< normalised "dddd:bb:dd.f" ("" for a host bridge)
    int parent = -1;          ///< index of the parent bridge, -1 at the top (a host bridge)
    bool hostBridge = false;  ///< a PCI host bridge (root complex)
    int numaNode = -1;        ///< NUMA node above it (-1 unknown)
  };
  /// A NIC: an OS network or OpenFabrics device under a PCI device.
  struct Nic {
    std::string name;    ///< "mlx5_0" (OpenFabrics name when there is one), else the network interface ("eth0")
    int node = -1;       ///< its PCI device in `nodes`
    std::string netdev;  ///< its network interface ("eth0", "ibp9s0"); "" when hwloc shows none
  };
  std::vector<Node> nodes;  ///< every bridge and device
  std::vector<Nic> nics;    ///< NICs, in hwloc's order
  std::string error;        ///< non-empty when hwloc could not be used
  /// Index of the device with this bus id (any case, any domain width), -1 when absent.
  int find(const std::string& busId) const;
};

/// Reads this host's PCI tree with hwloc (HWLOC_XMLFILE, as everywhere in hwloc, replays a recorded machine).
/// Never throws: on failure `error` says why.
PciTree readPciTree();

/// "dddd:bb:dd.f" in lower case from any of the forms the CUDA driver, NVML and hwloc print
/// ("00000000:07:00.0", "0000:07:00.0"); "" when it does not parse.
std::string normaliseBusId(const std::string& busId);

/// The link class between two nodes of the tree (PIX, PXB, PHB, NODE, SYS).
DeviceLink pciLink(const PciTree& tree, int a, int b);

/// The host's topology from the facts and the tree. GPUs keep the facts' order; `source` names what answered.
GpuTopology buildGpuTopology(const GpuFacts& facts, const PciTree& tree);

/// Where one rank's GPU sits in its host's topology.
struct GpuPlacement {
  int gpu = -1;           ///< index into the topology's GPUs (-1: not found)
  int ringPosition = -1;  ///< position of that GPU in gpuRingOrder()
  int nic = -1;           ///< nearestNics()[gpu] (-1: the host has no NIC)
  std::string nicName;    ///< that NIC's name ("" when none)
  std::string nicNetdev;  ///< that NIC's network interface, for sockets ("" when none is known)
};
/// Finds the GPU with `busId` in `topo` and reports its ring position and NIC; gpu = -1 when it is not there.
GpuPlacement placeGpu(const GpuTopology& topo, const std::string& busId);

}  // namespace hoccl::topo
