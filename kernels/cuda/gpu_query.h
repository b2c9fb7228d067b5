/// @file gpu_query.h
/// What the GPU software stack of this host says about its GPUs, read at run time: the CUDA driver (libcuda.so.1:
/// the GPUs this process may use, their PCI bus ids, peer access between them, multiprocessor counts) and NVML
/// (libnvidia-ml.so.1: every GPU of the host whatever CUDA_VISIBLE_DEVICES says, their NVLinks and NVML's PCIe
/// level between two GPUs). Both are loaded with dlopen; a missing library or a failing call leaves its part empty
/// and adds a note, never an error. topology/gpu_discovery.h turns this into the host's GPU topology.
#pragma once

#include <string>
#include <vector>

namespace hoccl::cuda {

/// One GPU as the driver or NVML reports it.
struct QueriedGpu {
  std::string busId;         ///< PCI bus id as reported ("00000000:07:00.0" or "0000:07:00.0")
  std::string name;          ///< "NVIDIA H100 80GB HBM3"
  int cudaOrdinal = -1;      ///< CUDA device ordinal in this process (-1: not visible to CUDA here)
  int multiprocessors = -1;  ///< CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT (-1 unknown)
  int nvswitchLinks = 0;     ///< active NVLinks to an NVSwitch (NVML)
};

/// The GPUs (NVML's list when NVML answers, which has every GPU of the host, else CUDA's), with matrices over them.
struct GpuQuery {
  std::vector<QueriedGpu> gpus;                  ///< the GPUs, NVML's order (else CUDA's ordered by bus id)
  std::vector<std::vector<int>> nvlinks;         ///< [a][b]: active NVLinks from a directly to b (empty without NVML)
  std::vector<std::vector<int>> commonAncestor;  ///< [a][b]: NVML's topology level (0..50), -1 unknown
  std::vector<std::vector<int>> peerAccess;      ///< [a][b]: cuDeviceCanAccessPeer 1/0, -1 (not both visible to CUDA)
  bool cuda = false;                             ///< the CUDA driver answered
  bool nvml = false;                             ///< NVML answered
  std::vector<std::string> notes;                ///< what was missing ("no libnvidia-ml.so.1: ...")
};

/// Queries the driver and NVML (NVML is initialised and shut down inside). Never throws.
GpuQuery queryGpus();

/// The PCI bus id of CUDA device `ordinal` of this process, "" without a driver or on error.
std::string cudaBusId(int ordinal);
/// The multiprocessor count of CUDA device `ordinal`, -1 without a driver or on error.
int cudaMultiprocessors(int ordinal);

}  // namespace hoccl::cuda
