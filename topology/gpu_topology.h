/// @file gpu_topology.h
/// The GPUs and NICs of one host and how they connect, and the two decisions hoccl takes from it: the order of a
/// host's GPUs in a ring (each hop over the best link available) and the NIC each GPU's rank uses (the nearest,
/// spread across GPUs that are equally near).
///
/// The link between two devices uses the vocabulary of `nvidia-smi topo -m`, best first:
///   NV<n>  n NVLinks (GPU to GPU only)
///   PIX    through at most one PCIe bridge (the same PCIe switch)
///   PXB    through several PCIe bridges, without crossing a host bridge
///   PHB    through a PCIe host bridge (the same CPU root complex)
///   NODE   across host bridges within one NUMA node
///   SYS    across the interconnect between NUMA nodes (sockets)
///
/// A topology comes from a recorded file (JSON, below), written by hand or from `nvidia-smi topo -m` on the machine,
/// so that the decisions can be checked and tested where no GPU is present, or from the live machine
/// (gpu_discovery.h: the CUDA driver, NVML and hwloc's PCI tree), which fills the same structure.
///
/// The file:
///   { "gpus":  [ {"bus_id": "0000:07:00.0", "numa": 0}, ... ],
///     "nics":  [ {"name": "mlx5_0", "numa": 0, "netdev": "ibp9s0"}, ... ],   (netdev optional)
///     "links": [ ["X", "NV12", ..., "PIX", ...], ... ] }
/// `links` is a square matrix over the GPUs then the NICs, in that order, symmetric, "X" on the diagonal; entries
/// between two NICs are not used (any word, e.g. "-").
#pragma once

#include <string>
#include <vector>

namespace hoccl::topo {

/// How two devices of a host are connected (nvidia-smi's vocabulary), best first.
enum class DeviceLink { NvLink, Pix, Pxb, Phb, Node, Sys };

/// One GPU of the host.
struct GpuDevice {
  std::string busId;  ///< "0000:07:00.0" (as given; used only for messages and dumps)
  int numaNode = -1;  ///< NUMA node (-1 unknown)
};

/// One NIC of the host.
struct NicDevice {
  std::string name;    ///< "mlx5_0"
  int numaNode = -1;   ///< NUMA node (-1 unknown)
  std::string netdev;  ///< its network interface ("ibp9s0", what a socket binds to); "" when unknown or none
};

/// The link between two devices: its class, and the number of NVLinks when the class is NvLink.
struct LinkInfo {
  DeviceLink kind = DeviceLink::Sys;  ///< the class
  int nvlinks = 0;                    ///< NVLinks between the two GPUs (NvLink only)
};

/// The GPUs and NICs of one host and the links between them.
struct GpuTopology {
  std::vector<GpuDevice> gpus;                  ///< GPUs, in CUDA index order
  std::vector<NicDevice> nics;                  ///< NICs
  std::vector<std::vector<LinkInfo>> gpuLinks;  ///< gpuLinks[a][b]: GPU a to GPU b (a != b)
  std::vector<std::vector<LinkInfo>> nicLinks;  ///< nicLinks[g][n]: GPU g to NIC n
  std::vector<std::vector<int>> peerAccess;     ///< [a][b]: CUDA peer access 1/0, -1 unknown; empty when not known
  std::string source;                           ///< where it came from ("file gpus.json"), for messages
};

/// Parses a recorded topology (the JSON of the file comment). Throws hoccl::Error (hocclInvalidArgument) naming
/// `what` (e.g. the file's path) and the offending entry: bad JSON, a matrix of the wrong size, an asymmetric entry,
/// an unknown link word, NVLink to a NIC.
GpuTopology parseGpuTopology(const std::string& text, const std::string& what);
/// Reads and parses a recorded topology file. Throws hocclInvalidArgument when it cannot be read or parsed.
GpuTopology loadGpuTopology(const std::string& path);

/// The link word of `link` ("NV12", "PIX", ...).
std::string linkName(const LinkInfo& link);

/// The order in which a ring visits the host's GPUs (a permutation of 0..n-1 starting with 0). The ring's slowest
/// hop bounds its bandwidth, so the order minimises a cost in which each worse link class weighs far more than all
/// better hops together; among NVLink hops, more links cost less. Exact (dynamic programming over subsets) up to 16
/// GPUs, greedy nearest neighbour beyond.
std::vector<int> gpuRingOrder(const GpuTopology& topo);

/// The NIC index each GPU's rank should use: the nearest NIC (best link class); among equally near NICs, the one
/// fewest GPUs use so far, then the lowest index. Empty entries (-1) when the host has no NIC.
std::vector<int> nearestNics(const GpuTopology& topo);

/// A person's view: the link matrix (as nvidia-smi topo -m prints it), the ring order with its hops by class, and
/// each GPU's NIC with its link.
std::string describeGpuTopology(const GpuTopology& topo);
/// The same as JSON: the recorded file's fields (it parses back) plus "ring" and "nic_of" (NIC names, null where
/// none).
std::string gpuTopologyJson(const GpuTopology& topo);

}  // namespace hoccl::topo
