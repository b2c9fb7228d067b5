/// @file fake_libcuda_machine.cc
/// STAND-IN for the CUDA driver (libcuda.so.1) of a recorded GPU machine (fake_machine.h), for the GPU topology tests
/// on machines without a GPU; found only through LD_LIBRARY_PATH set by those tests. It answers the device queries
/// the topology discovery makes (count, PCI bus id, name, multiprocessors, peer access) and honours
/// CUDA_VISIBLE_DEVICES (a comma list of indices) as the real driver does. It also exports the entry points hoccl's
/// CUDA device binds, so that a process "has" CUDA device 0; every call that would touch memory, streams or kernels
/// fails (CUDA_ERROR_NOT_SUPPORTED), so nothing can be run on this fake.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../fake_machine.h"

namespace {
constexpr int kNotSupported = 801;   // CUDA_ERROR_NOT_SUPPORTED
constexpr int kInvalidDevice = 101;  // CUDA_ERROR_INVALID_DEVICE

// This process's devices: indices into the machine's GPUs.
const std::vector<int>& visible() {
  static const std::vector<int> v = [] {
    std::vector<int> out;
    const int n = static_cast<int>(fake::machine().busIds.size());
    const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
    if (!env) {
      for (int i = 0; i < n; ++i) out.push_back(i);
      return out;
    }
    std::string list(env);
    size_t start = 0;
    while (start <= list.size()) {
      const size_t end = list.find(',', start);
      const std::string item = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
      char* stop = nullptr;
      const long idx = std::strtol(item.c_str(), &stop, 10);
      if (item.empty() || *stop || idx < 0 || idx >= n) break;  // the driver stops at the first invalid entry
      out.push_back(static_cast<int>(idx));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return out;
  }();
  return v;
}

bool valid(int dev) { return dev >= 0 && dev < static_cast<int>(visible().size()); }
int physical(int dev) { return visible()[dev]; }
}  // namespace

extern "C" {

int cuInit(unsigned) { return fake::machine().busIds.empty() ? 100 : 0; }  // 100: CUDA_ERROR_NO_DEVICE

int cuDeviceGetCount(int* n) {
  *n = static_cast<int>(visible().size());
  return 0;
}

int cuDeviceGet(int* dev, int ordinal) {
  if (!valid(ordinal)) return kInvalidDevice;
  *dev = ordinal;
  return 0;
}

int cuDeviceGetPCIBusId(char* out, int len, int dev) {
  if (!valid(dev)) return kInvalidDevice;
  std::string id = fake::machine().busIds[physical(dev)];
  for (char& c : id) c = static_cast<char>(c >= 'a' && c <= 'f' ? c - 'a' + 'A' : c);  // the driver prints upper case
  std::snprintf(out, static_cast<size_t>(len), "%s", id.c_str());
  return 0;
}

int cuDeviceGetName(char* out, int len, int dev) {
  if (!valid(dev)) return kInvalidDevice;
  std::snprintf(out, static_cast<size_t>(len), "Fake GPU %d (stand-in)", physical(dev));
  return 0;
}

int cuDeviceGetAttribute(int* value, int attribute, int dev) {
  if (!valid(dev)) return kInvalidDevice;
  if (attribute != 16) return kNotSupported;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT only
  *value = fake::machine().multiprocessors[physical(dev)];
  return 0;
}

// Peer access: over NVLink, or PCIe within one CPU socket (NVML level below SYS), as on the recorded machines.
int cuDeviceCanAccessPeer(int* can, int dev, int peer) {
  if (!valid(dev) || !valid(peer)) return kInvalidDevice;
  const auto& m = fake::machine();
  const int a = physical(dev), b = physical(peer);
  bool nvlink = false;
  for (size_t l = 0; l < m.linkRemote[a].size(); ++l)
    nvlink = nvlink || m.linkToSwitch[a][l] || m.linkRemote[a][l] == m.busIds[b];
  auto it = m.level.find({a, b});
  *can = a != b && (nvlink || (it != m.level.end() && it->second < 50));
  return 0;
}

int cuGetErrorString(int, const char** text) {
  *text = "fake CUDA driver (stand-in): not supported";
  return 0;
}

// What hoccl's CUDA device binds: a context exists, nothing else works.
int cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  if (!valid(dev)) return kInvalidDevice;
  *ctx = reinterpret_cast<void*>(0xc0de);
  return 0;
}
int cuCtxSetCurrent(void*) { return 0; }
int cuMemAlloc_v2(unsigned long long*, size_t) { return kNotSupported; }
int cuStreamCreate(void**, unsigned) { return kNotSupported; }
int cuEventCreate(void**, unsigned) { return kNotSupported; }
int cuStreamWaitValue32_v2(void*, unsigned long long, unsigned, unsigned) { return kNotSupported; }
int cuLaunchHostFunc(void*, void (*)(void*), void*) { return kNotSupported; }
int cuPointerGetAttribute(void*, int, unsigned long long) { return 1; }  // no pointer is CUDA memory

}  // extern "C"
