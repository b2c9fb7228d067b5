/// @file fake_machine.h
/// STAND-IN hardware for tests: the recorded machine that the fake CUDA driver (fake_cuda/) and the fake NVML
/// (fake_nvml/) describe, read from the file named by HOCCL_FAKE_GPU_MACHINE (written by fake_machines.py). No GPU
/// is on the machines the tests run on; these fakes replay what the real libraries report on the recorded machines.
/// Lines:
///   gpu <bus id> <multiprocessors>          one GPU (in NVML's index order)
///   nvlink <gpu a> <gpu b> <links>          NVLinks directly between two GPUs
///   nvswitch <gpu> <links> <switch bus id>  NVLinks from a GPU to an NVSwitch
///   level <gpu a> <gpu b> <nvml level>      nvmlDeviceGetTopologyCommonAncestor (10 PIX ... 50 SYS)
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fake {

struct Machine {
  std::vector<std::string> busIds;
  std::vector<int> multiprocessors;
  std::vector<std::vector<std::string>> linkRemote;  // [gpu][link]: remote bus id
  std::vector<std::vector<bool>> linkToSwitch;       // [gpu][link]: the remote is an NVSwitch
  std::map<std::pair<int, int>, int> level;
};

inline const Machine& machine() {
  static const Machine m = [] {
    Machine x;
    const char* path = std::getenv("HOCCL_FAKE_GPU_MACHINE");
    if (!path) return x;
    std::ifstream in(path);
    std::string line;
    std::vector<std::vector<std::pair<int, int>>> direct;      // [gpu] -> (peer, links)
    std::vector<std::vector<std::pair<std::string, int>>> sw;  // [gpu] -> (switch, links)
    while (std::getline(in, line)) {
      std::istringstream s(line);
      std::string kind;
      s >> kind;
      if (kind == "gpu") {
        std::string bus;
        int sms = 0;
        s >> bus >> sms;
        x.busIds.push_back(bus);
        x.multiprocessors.push_back(sms);
        direct.emplace_back();
        sw.emplace_back();
      } else if (kind == "nvlink") {
        int a = 0, b = 0, n = 0;
        s >> a >> b >> n;
        direct[a].push_back({b, n});
        direct[b].push_back({a, n});
      } else if (kind == "nvswitch") {
        int g = 0, n = 0;
        std::string bus;
        s >> g >> n >> bus;
        sw[g].push_back({bus, n});
      } else if (kind == "level") {
        int a = 0, b = 0, l = 0;
        s >> a >> b >> l;
        x.level[{a, b}] = l;
        x.level[{b, a}] = l;
      }
    }
    x.linkRemote.resize(x.busIds.size());
    x.linkToSwitch.resize(x.busIds.size());
    for (size_t g = 0; g < x.busIds.size(); ++g) {
      for (auto& [peer, n] : direct[g])
        for (int i = 0; i < n; ++i) {
          x.linkRemote[g].push_back(x.busIds[peer]);
          x.linkToSwitch[g].push_back(false);
        }
      for (auto& [bus, n] : sw[g])
        for (int i = 0; i < n; ++i) {
          x.linkRemote[g].push_back(bus);
          x.linkToSwitch[g].push_back(true);
        }
    }
    return x;
  }();
  return m;
}

}  // namespace fake
