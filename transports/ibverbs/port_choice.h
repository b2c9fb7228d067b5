/// @file port_choice.h
/// Which of the admitted RDMA ports (probePorts, HOCCL_IB_HCA) a rank uses: a pure function, no device needed.
///
/// A rank on a GPU uses a port of its GPU's nearest NIC (topology/gpu_topology.h: nearestNics, found from the CUDA
/// driver, NVML and hwloc's PCI tree), so that its traffic does not cross the CPU sockets' link or a PCIe root it
/// need not. The ranks of one host that share that NIC spread over its ports by their index among the host's ranks.
/// Without a GPU, or when the GPU's NIC has no admitted active port, the host's ranks spread over all admitted ports,
/// as before.
#pragma once

#include <string>
#include <vector>

#include "transports/ibverbs/ibv_device.h"

namespace hoccl::transport::ibverbs {

/// The port a rank uses, and why (for the INFO line naming it).
struct PortChoice {
  size_t index = 0;  ///< into the admitted ports
  std::string why;   ///< "the nearest NIC of this rank's GPU (mlx5_1)", ...
};

/// Chooses among `ports` (non-empty, in device and port order) for the rank with index `localIndex` among its host's
/// ranks, whose GPU's nearest NIC is the RDMA device `nearDevice` ("" without a GPU or without a NIC near it).
PortChoice choosePort(const std::vector<PortInfo>& ports, const std::string& nearDevice, int localIndex);

}  // namespace hoccl::transport::ibverbs
