// This host's GPU topology and this process's place in it (gpu_host.h): kernels/cuda/gpu_query.h's facts, hwloc's
// PCI tree, topology/gpu_discovery.h's model.
#include "comm/gpu_host.h"

#include <fmt/format.h>

#include "base/log.h"
#include "kernels/cuda/gpu_query.h"
#include "kernels/device/device.h"

namespace hoccl {

topo::GpuTopology discoverHostGpus(std::vector<std::string>* notes) {
  const cuda::GpuQuery q = cuda::queryGpus();
  topo::GpuFacts facts;
  for (const auto& g : q.gpus) {
    facts.busIds.push_back(g.busId);
    facts.nvswitchLinks.push_back(g.nvswitchLinks);
  }
  facts.nvlinks = q.nvlinks;
  facts.commonAncestor = q.commonAncestor;
  facts.peerAccess = q.peerAccess;
  if (q.cuda) facts.sources.push_back("CUDA driver");
  if (q.nvml) facts.sources.push_back(fmt::format("NVML: {} GPUs", q.gpus.size()));
  facts.notes = q.notes;
  if (q.gpus.empty()) {
    topo::GpuTopology empty;
    std::string why;
    for (const auto& n : q.notes) why += (why.empty() ? "" : "; ") + n;
    empty.source = fmt::format("live: no GPU found ({})", why.empty() ? "the driver reports no device" : why);
    if (notes) *notes = q.notes;
    return empty;
  }
  if (notes) *notes = q.notes;
  return topo::buildGpuTopology(facts, topo::readPciTree());
}

const topo::GpuTopology& hostGpus() {
  static const topo::GpuTopology& topo = *new topo::GpuTopology([] {
    topo::GpuTopology t = discoverHostGpus();
    HOCCL_INFO(kTopo, "GPU topology: {} GPU(s), {} NIC(s) ({})", t.gpus.size(), t.nics.size(), t.source);
    return t;
  }());
  return topo;
}

RankGpu rankGpu() {
  RankGpu r;
  device::Device* d = device::current();
  if (!d || d->simulated()) return r;
  r.ordinal = d->ordinal();
  r.busId = cuda::cudaBusId(r.ordinal);
  r.place = topo::placeGpu(hostGpus(), r.busId);
  if (r.place.gpu < 0)
    HOCCL_INFO(kTopo, "CUDA device {} ({}) is not in the host's GPU topology: no GPU ring order or NIC from it",
               r.ordinal, r.busId.empty() ? "bus id unknown" : r.busId);
  else
    HOCCL_INFO(kTopo, "CUDA device {} is GPU{} ({}) of the host: position {} of the GPU ring, nearest NIC {}",
               r.ordinal, r.place.gpu, r.busId, r.place.ringPosition,
               r.place.nicName.empty() ? "none" : r.place.nicName);
  return r;
}

}  // namespace hoccl
