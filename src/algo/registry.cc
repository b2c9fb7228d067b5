// The algorithm registry and the per-call choice (see registry.h).
#include "algo/registry.h"

#include <algorithm>
#include <cctype>

#include "algo/direct.h"
#include "algo/ho_ring.h"
#include "algo/ring.h"
#include "algo/tuner.h"
#include "base/error.h"
#include "base/log.h"
#include "base/params.h"

namespace hoccl::algo {
namespace {

using sched::Coll;

bool ringSupports(Coll c) {
  return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::AllGather || c == Coll::Broadcast ||
         c == Coll::Reduce;
}
bool directSupports(Coll) { return true; }
bool always(const sched::CollArgs&, const topo::Topology&) { return true; }

bool hoRingSupports(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::AllGather; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

const std::vector<Algorithm>& all() {
  static const std::vector<Algorithm> table = {
      {"ring", ringSupports, always, ringSchedule, ringFold},
      {"ho_ring", hoRingSupports, hoRingApplicable, hoRingSchedule, hoRingFold},
      {"direct", directSupports, always, directSchedule, directFold},
  };
  return table;
}

std::string validNames() {
  std::string names;
  for (const auto& a : all()) names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

const Algorithm& byName(const std::string& name) {
  std::string want = lower(name);
  if (want == "horing" || want == "ho-ring") want = "ho_ring";
  for (const auto& a : all())
    if (want == a.name) return a;
  throwInvalidArgument("unknown algorithm '" + name + "' in HOCCL_ALGO; valid names: " + validNames() +
                       ", and the one-host shortcuts " + shortcutNames());
}

std::vector<const Algorithm*> candidates(const sched::CollArgs& args, const topo::Topology& topo) {
  std::vector<const Algorithm*> out;
  for (const auto& a : all())
    if (a.supports(args.coll) && a.applicable(args, topo)) out.push_back(&a);
  return out;
}

const Algorithm& choose(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize) {
  if (auto forced = params::ALGO.value(); forced && !isShortcutName(*forced)) {
    const Algorithm& a = byName(*forced);
    if (a.supports(args.coll) && a.applicable(args, topo)) return a;
    HOCCL_INFO(kTuning, "HOCCL_ALGO={} does not apply to {}; using the default", *forced, sched::collName(args.coll));
  }
  auto c = candidates(args, topo);
  if (c.empty()) throwInternalError(std::string("no algorithm implements ") + sched::collName(args.coll));
  return *tune(args, topo, elemSize, c).algorithm;
}

}  // namespace hoccl::algo
