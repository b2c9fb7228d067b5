/// @file fake_libnvml.cc
/// STAND-IN for NVML (libnvidia-ml.so.1) of a recorded GPU machine (fake_machine.h), for the GPU topology tests on
/// machines without a GPU; found only through LD_LIBRARY_PATH set by those tests. It lists every GPU of the machine
/// (NVML ignores CUDA_VISIBLE_DEVICES), their PCI info, their NVLinks (state, remote PCI bus id, remote device type)
/// and the PCIe level between two GPUs. HOCCL_FAKE_NVML_NO_ANCESTOR=1 makes the last unsupported, as on NVML builds
/// without it, so that the tests also cover the level read off hwloc's tree.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../fake_machine.h"

namespace {
constexpr int kInvalidArgument = 2;  // NVML_ERROR_INVALID_ARGUMENT
constexpr int kNotSupported = 3;     // NVML_ERROR_NOT_SUPPORTED

struct PciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

int indexOf(void* handle) {
  const long i = reinterpret_cast<long>(handle) - 1;
  return i >= 0 && i < static_cast<long>(fake::machine().busIds.size()) ? static_cast<int>(i) : -1;
}

void fill(PciInfo* info, const std::string& bus) {
  std::memset(info, 0, sizeof *info);
  unsigned d = 0, b = 0, dev = 0, fn = 0;
  std::sscanf(bus.c_str(), "%x:%x:%x.%x", &d, &b, &dev, &fn);
  info->domain = d;
  info->bus = b;
  info->device = dev;
  std::snprintf(info->busIdLegacy, sizeof info->busIdLegacy, "%04X:%02X:%02X.%X", d, b, dev, fn);
  std::snprintf(info->busId, sizeof info->busId, "%08X:%02X:%02X.%X", d, b, dev, fn);  // NVML's 8-digit domain
}
}  // namespace

extern "C" {

int nvmlInit_v2() { return fake::machine().busIds.empty() ? 12 : 0; }  // 12: NVML_ERROR_LIBRARY_NOT_FOUND-like
int nvmlShutdown() { return 0; }

int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = static_cast<unsigned>(fake::machine().busIds.size());
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** handle) {
  if (i >= fake::machine().busIds.size()) return kInvalidArgument;
  *handle = reinterpret_cast<void*>(static_cast<long>(i) + 1);
  return 0;
}

int nvmlDeviceGetPciInfo_v3(void* handle, PciInfo* info) {
  const int g = indexOf(handle);
  if (g < 0) return kInvalidArgument;
  fill(info, fake::machine().busIds[g]);
  return 0;
}

int nvmlDeviceGetName(void* handle, char* name, unsigned len) {
  const int g = indexOf(handle);
  if (g < 0) return kInvalidArgument;
  std::snprintf(name, len, "Fake GPU %d (stand-in)", g);
  return 0;
}

int nvmlDeviceGetNvLinkState(void* handle, unsigned link, int* active) {
  const int g = indexOf(handle);
  if (g < 0 || link >= 18) return kInvalidArgument;
  *active = link < fake::machine().linkRemote[g].size() ? 1 : 0;
  return 0;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* handle, unsigned link, PciInfo* info) {
  const int g = indexOf(handle);
  if (g < 0 || link >= fake::machine().linkRemote[g].size()) return kInvalidArgument;
  fill(info, fake::machine().linkRemote[g][link]);
  return 0;
}

int nvmlDeviceGetNvLinkRemoteDeviceType(void* handle, unsigned link, int* type) {
  const int g = indexOf(handle);
  if (g < 0 || link >= fake::machine().linkRemote[g].size()) return kInvalidArgument;
  *type = fake::machine().linkToSwitch[g][link] ? 2 : 0;  // NVML_NVLINK_DEVICE_TYPE_SWITCH : _GPU
  return 0;
}

int nvmlDeviceGetTopologyCommonAncestor(void* a, void* b, int* level) {
  if (std::getenv("HOCCL_FAKE_NVML_NO_ANCESTOR")) return kNotSupported;
  const int x = indexOf(a), y = indexOf(b);
  if (x < 0 || y < 0) return kInvalidArgument;
  auto it = fake::machine().level.find({x, y});
  *level = x == y ? 0 : it == fake::machine().level.end() ? 50 : it->second;
  return 0;
}

}  // extern "C"
