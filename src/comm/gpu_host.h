/// @file gpu_host.h
/// The glue between the GPU software stack and the topology floor: gathers the CUDA driver's and NVML's facts
/// (kernels/cuda/gpu_query.h), reads hwloc's PCI tree and builds this host's GPU topology
/// (topology/gpu_discovery.h), and places this process's GPU in it (ring position, nearest NIC). It lives in src/
/// because it uses both kernels/ and topology/ and topology/ does not load drivers (docs/architecture.md).
#pragma once

#include <string>
#include <vector>

#include "topology/gpu_discovery.h"

namespace hoccl {

/// This host's GPU topology from the live machine, discovered now (uncached). No driver, no NVML, no GPU: an empty
/// model (no GPUs) whose `source` says what was missing; never throws. `notes` (optional) receives what was missing.
topo::GpuTopology discoverHostGpus(std::vector<std::string>* notes = nullptr);
/// The same, discovered once per process and kept.
const topo::GpuTopology& hostGpus();

/// This process's GPU and its place on the host.
struct RankGpu {
  int ordinal = -1;          ///< the CUDA device the communicator uses (hocclCommCuDevice), -1: none
  std::string busId;         ///< its PCI bus id
  topo::GpuPlacement place;  ///< its ring position and nearest NIC (gpu = -1 when not found in hostGpus())
};
/// The GPU of this process: the process's device when it is a real CUDA device (not the simulated one), placed in
/// hostGpus(). ordinal = -1 without one. Logs the placement at INFO.
RankGpu rankGpu();

}  // namespace hoccl
