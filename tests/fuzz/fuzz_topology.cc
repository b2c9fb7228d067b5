/*
 * libFuzzer target: topology files (topology/topo_file.cc), JSON or Slurm topology.conf, and the Slurm host lists
 * inside them. The first input byte picks the entry point (even: a whole file, then fromSwitchMap; odd: one host
 * list); bad input must end in hoccl::Error (InvalidArgument), never in a crash, a hang or an unbounded
 * allocation, and a parsed file lists every host once.
 */
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <unordered_set>

#include "base/error.h"
#include "topology/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(bytes) + 1, size - 1);
  try {
    if (bytes[0] % 2 == 0) {
      const hoccl::topo::SwitchMap map = hoccl::topo::parseTopologyText(text, "<fuzz>");
      std::unordered_set<std::string> hosts;
      for (const auto& [host, sw] : map.hostSwitch)
        if (!hosts.insert(host).second) std::abort();  // a host under two switches must have been refused
      if (map.switches.empty()) return 0;
      const hoccl::topo::Topology topo = hoccl::topo::fromSwitchMap(map, 1 + bytes[0] / 64);
      (void)topo;
    } else {
      (void)hoccl::topo::expandHostList(text);
    }
  } catch (const hoccl::Error& e) {
    if (e.code() != hocclInvalidArgument) std::abort();  // bad input is an invalid argument, nothing else
  }
  return 0;
}
