// Default tuner: the first candidate (registry order). The topology/HO-Ring owner replaces this with the
// cost-model choice.
#include "algo/tuner.h"

namespace hoccl::algo {

const Algorithm& tune(const sched::CollArgs&, const topo::Topology&, size_t, const std::vector<const Algorithm*>& c) {
  return *c.front();
}

}  // namespace hoccl::algo
