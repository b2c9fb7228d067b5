// The cores per host from the all-gathered RankInfo (host_cores.h): the union of each host's affinity masks, the
// fewest of any host. Before, the masks were all-gathered in a round of their own at every init and split.
#include "comm/host_cores.h"

#include <sys/sysinfo.h>

#include <algorithm>

namespace hoccl {

cpu_set_t usableCpuMask() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0 || CPU_COUNT(&mask) == 0) {
    CPU_ZERO(&mask);
    for (int c = 0; c < std::min(std::max(1, get_nprocs()), CPU_SETSIZE); ++c) CPU_SET(c, &mask);
  }
  return mask;
}

int fewestHostCores(const std::vector<boot::RankInfo>& ranks, const std::vector<int>& hostOf) {
  const size_t n = std::min(ranks.size(), hostOf.size());
  int nhosts = 0;
  for (size_t r = 0; r < n; ++r) nhosts = std::max(nhosts, hostOf[r] + 1);
  std::vector<cpu_set_t> ofHost(static_cast<size_t>(nhosts));
  for (cpu_set_t& u : ofHost) CPU_ZERO(&u);
  for (size_t r = 0; r < n; ++r) {
    if (hostOf[r] < 0) continue;
    cpu_set_t& u = ofHost[static_cast<size_t>(hostOf[r])];
    CPU_OR(&u, &u, &ranks[r].cpus);
  }
  int fewest = 0;
  for (const cpu_set_t& u : ofHost)
    if (CPU_COUNT(&u) > 0) fewest = fewest == 0 ? CPU_COUNT(&u) : std::min(fewest, CPU_COUNT(&u));
  return fewest;
}

}  // namespace hoccl
