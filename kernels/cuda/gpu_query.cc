// GPU facts from the CUDA driver and NVML, both loaded with dlopen (gpu_query.h). Driver ABI facts (cuda.h): CUresult
// and CUdevice are ints; NVML's (nvml.h): nvmlReturn_t is an int, handles are pointers, nvmlPciInfo_t is 16 chars of
// legacy bus id, five unsigned ints, then 32 chars of bus id.
#include "kernels/cuda/gpu_query.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace hoccl::cuda {
namespace {

constexpr int kAttrMultiprocessors = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kNvlinkMaxLinks = 18;       // NVML_NVLINK_MAX_LINKS
constexpr int kNvlinkSwitch = 2;          // NVML_NVLINK_DEVICE_TYPE_SWITCH
constexpr int kFeatureEnabled = 1;        // NVML_FEATURE_ENABLED

struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

template <class F>
void bind(void* lib, const char* name, F& fn) {
  fn = lib ? reinterpret_cast<F>(dlsym(lib, name)) : nullptr;
}

struct Cuda {
  void* lib = nullptr;
  int (*init)(unsigned) = nullptr;
  int (*getCount)(int*) = nullptr;
  int (*get)(int*, int) = nullptr;
  int (*busId)(char*, int, int) = nullptr;
  int (*name)(char*, int, int) = nullptr;
  int (*attribute)(int*, int, int) = nullptr;
  int (*canAccessPeer)(int*, int, int) = nullptr;
  bool usable = false;
};

const Cuda& cuda() {
  static const Cuda c = [] {
    Cuda x;
    x.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    bind(x.lib, "cuInit", x.init);
    bind(x.lib, "cuDeviceGetCount", x.getCount);
    bind(x.lib, "cuDeviceGet", x.get);
    bind(x.lib, "cuDeviceGetPCIBusId", x.busId);
    bind(x.lib, "cuDeviceGetName", x.name);
    bind(x.lib, "cuDeviceGetAttribute", x.attribute);
    bind(x.lib, "cuDeviceCanAccessPeer", x.canAccessPeer);
    x.usable = x.init && x.getCount && x.get && x.busId && x.init(0) == 0;
    return x;
  }();
  return c;
}

int cudaDevice(int ordinal) {
  int dev = -1;
  return cuda().usable && cuda().get(&dev, ordinal) == 0 ? dev : -1;
}

struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*getCount)(unsigned*) = nullptr;
  int (*handle)(unsigned, void**) = nullptr;
  int (*pciInfo)(void*, NvmlPciInfo*) = nullptr;
  int (*name)(void*, char*, unsigned) = nullptr;
  int (*linkState)(void*, unsigned, int*) = nullptr;
  int (*remotePci)(void*, unsigned, NvmlPciInfo*) = nullptr;
  int (*remoteType)(void*, unsigned, int*) = nullptr;
  int (*ancestor)(void*, void*, int*) = nullptr;
};

void queryCuda(GpuQuery& q) {
  const Cuda& c = cuda();
  if (!c.lib) {
    q.notes.push_back("no CUDA driver (libcuda.so.1 not found)");
    return;
  }
  int n = 0;
  if (!c.usable || c.getCount(&n) != 0) {
    q.notes.push_back("the CUDA driver did not initialise (cuInit failed)");
    return;
  }
  q.cuda = true;
  for (int i = 0; i < n; ++i) {
    QueriedGpu g;
    g.busId = cudaBusId(i);
    g.cudaOrdinal = i;
    g.multiprocessors = cudaMultiprocessors(i);
    char name[256] = {};
    if (c.name && c.name(name, sizeof name, cudaDevice(i)) == 0) g.name = name;
    q.gpus.push_back(g);
  }
  std::sort(q.gpus.begin(), q.gpus.end(), [](const QueriedGpu& a, const QueriedGpu& b) { return a.busId < b.busId; });
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(ch >= 'A' && ch <= 'F' ? ch - 'A' + 'a' : ch);
  return s;
}

// "00000000:07:00.0" / "0000:07:00.0" -> bus number etc. compared as (domain, bus, device, function).
bool sameBus(const std::string& a, const std::string& b) {
  unsigned x[4] = {}, y[4] = {};
  return std::sscanf(a.c_str(), "%x:%x:%x.%x", &x[0], &x[1], &x[2], &x[3]) == 4 &&
         std::sscanf(b.c_str(), "%x:%x:%x.%x", &y[0], &y[1], &y[2], &y[3]) == 4 && std::equal(x, x + 4, y);
}

void queryNvml(GpuQuery& q) {
  Nvml m;
  m.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!m.lib) {
    q.notes.push_back("no NVML (libnvidia-ml.so.1 not found): NVLinks unknown, GPUs limited to those CUDA shows");
    return;
  }
  bind(m.lib, "nvmlInit_v2", m.init);
  bind(m.lib, "nvmlShutdown", m.shutdown);
  bind(m.lib, "nvmlDeviceGetCount_v2", m.getCount);
  bind(m.lib, "nvmlDeviceGetHandleByIndex_v2", m.handle);
  bind(m.lib, "nvmlDeviceGetPciInfo_v3", m.pciInfo);
  bind(m.lib, "nvmlDeviceGetName", m.name);
  bind(m.lib, "nvmlDeviceGetNvLinkState", m.linkState);
  bind(m.lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", m.remotePci);
  bind(m.lib, "nvmlDeviceGetNvLinkRemoteDeviceType", m.remoteType);
  bind(m.lib, "nvmlDeviceGetTopologyCommonAncestor", m.ancestor);
  unsigned n = 0;
  if (!m.init || !m.getCount || !m.handle || !m.pciInfo || m.init() != 0) {
    q.notes.push_back("NVML did not initialise: NVLinks unknown");
    dlclose(m.lib);
    return;
  }
  if (m.getCount(&n) != 0) n = 0;
  std::vector<void*> handles;
  std::vector<QueriedGpu> gpus;
  for (unsigned i = 0; i < n; ++i) {
    void* h = nullptr;
    NvmlPciInfo pci{};
    if (m.handle(i, &h) != 0 || m.pciInfo(h, &pci) != 0) continue;
    QueriedGpu g;
    g.busId = lower(pci.busId);
    char name[96] = {};
    if (m.name && m.name(h, name, sizeof name) == 0) g.name = name;
    for (const auto& c : q.gpus)  // the CUDA view of the same GPU, when this process sees it
      if (sameBus(c.busId, g.busId)) {
        g.cudaOrdinal = c.cudaOrdinal;
        g.multiprocessors = c.multiprocessors;
      }
    handles.push_back(h);
    gpus.push_back(g);
  }
  const size_t g = gpus.size();
  q.nvlinks.assign(g, std::vector<int>(g, 0));
  q.commonAncestor.assign(g, std::vector<int>(g, -1));
  for (size_t a = 0; a < g; ++a) {
    for (unsigned link = 0; m.linkState && m.remotePci && link < kNvlinkMaxLinks; ++link) {
      int state = 0;
      NvmlPciInfo remote{};
      if (m.linkState(handles[a], link, &state) != 0 || state != kFeatureEnabled) continue;
      if (m.remotePci(handles[a], link, &remote) != 0) continue;
      int type = -1;
      const bool toSwitch = m.remoteType && m.remoteType(handles[a], link, &type) == 0 && type == kNvlinkSwitch;
      bool toGpu = false;
      for (size_t b = 0; b < g && !toSwitch; ++b)
        if (b != a && sameBus(gpus[b].busId, remote.busId)) {
          ++q.nvlinks[a][b];
          toGpu = true;
        }
      if (!toGpu) ++gpus[a].nvswitchLinks;  // an NVSwitch (or a remote NVML does not list as a GPU)
    }
    for (size_t b = 0; b < g && m.ancestor; ++b) {
      int level = -1;
      if (a != b && m.ancestor(handles[a], handles[b], &level) == 0) q.commonAncestor[a][b] = level;
    }
  }
  if (m.shutdown) m.shutdown();
  dlclose(m.lib);
  if (!m.linkState || !m.remotePci) q.notes.push_back("NVML has no NVLink queries: NVLinks unknown");
  q.nvml = true;
  q.gpus = gpus;
}

void queryPeerAccess(GpuQuery& q) {
  const Cuda& c = cuda();
  const size_t g = q.gpus.size();
  q.peerAccess.assign(g, std::vector<int>(g, -1));
  if (!c.usable || !c.canAccessPeer) return;
  for (size_t a = 0; a < g; ++a)
    for (size_t b = 0; b < g; ++b) {
      const int da = q.gpus[a].cudaOrdinal, db = q.gpus[b].cudaOrdinal;
      int can = 0;
      if (a == b) q.peerAccess[a][b] = 1;
      else if (da >= 0 && db >= 0 && c.canAccessPeer(&can, cudaDevice(da), cudaDevice(db)) == 0)
        q.peerAccess[a][b] = can ? 1 : 0;
    }
}

}  // namespace

std::string cudaBusId(int ordinal) {
  const Cuda& c = cuda();
  const int dev = cudaDevice(ordinal);
  char id[64] = {};
  if (dev < 0 || c.busId(id, sizeof id, dev) != 0) return "";
  return lower(id);
}

int cudaMultiprocessors(int ordinal) {
  const Cuda& c = cuda();
  const int dev = cudaDevice(ordinal);
  int n = -1;
  if (dev < 0 || !c.attribute || c.attribute(&n, kAttrMultiprocessors, dev) != 0) return -1;
  return n;
}

GpuQuery queryGpus() {
  GpuQuery q;
  queryCuda(q);
  queryNvml(q);
  queryPeerAccess(q);
  if (!q.nvml) {
    const size_t g = q.gpus.size();
    q.nvlinks.clear();
    q.commonAncestor.assign(g, std::vector<int>(g, -1));
  }
  return q;
}

}  // namespace hoccl::cuda
