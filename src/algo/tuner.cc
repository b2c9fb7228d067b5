// Tuner: picks the candidate algorithm with the lowest time predicted by the cost model (topology/cost_model.h)
// over the schedules of all ranks. Every rank computes the same choice from the same inputs (topology, arguments,
// HOCCL_LINK_* parameters), so no agreement round is needed; HOCCL_LINK_* must therefore be equal on all ranks.
// Predictions are cached per (collective, count, element size, root, chunk, topology, candidates). Jobs larger than
// kMaxSimulatedRanks skip the simulation: HO-Ring when the topology has more than one level and the message is
// large, else the first candidate.
#include "algo/tuner.h"

#include <map>
#include <mutex>
#include <tuple>

#include "base/log.h"
#include "sched/cost_model.h"

namespace hoccl::algo {
namespace {

constexpr int kMaxSimulatedRanks = 64;  // simulating 64 ranks x 2 algorithms takes ~1 s here
constexpr size_t kMaxCacheEntries = 4096;

using Key = std::tuple<int, int, size_t, size_t, int, size_t, uint64_t, std::string>;

uint64_t topologyHash(const topo::Topology& t) {
  std::string s;
  for (int r = 0; r < t.nranks; ++r) s += std::to_string(t.hostOf[r]) + "/" + std::to_string(t.switchOf[r]) + ",";
  return topo::hashId(s);
}

const Algorithm& heuristic(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
                           const std::vector<const Algorithm*>& c) {
  bool large = args.count * elemSize >= (1u << 20);
  if (large && topo::hierarchy(topo).levels() > 1)
    for (const Algorithm* a : c)
      if (std::string(a->name) == "ho_ring") return *a;
  return *c.front();
}

}  // namespace

const Algorithm& tune(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
                      const std::vector<const Algorithm*>& c) {
  if (c.size() == 1) return *c.front();
  if (topo.nranks > kMaxSimulatedRanks) return heuristic(args, topo, elemSize, c);
  static std::mutex mutex;
  static std::map<Key, const Algorithm*> cache;
  std::string names;
  for (const Algorithm* a : c) names += std::string(a->name) + ",";
  Key key{static_cast<int>(args.coll), args.nranks, args.count, args.chunkCount, args.root, elemSize,
          topologyHash(topo), names};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return *it->second;
  }
  topo::LinkModel model = topo::LinkModel::fromParams();
  const Algorithm* best = nullptr;
  double bestTime = 0;
  std::string report;
  for (const Algorithm* a : c) {
    double seconds;
    try {
      std::vector<sched::Schedule> all;
      sched::CollArgs each = args;
      for (int r = 0; r < args.nranks; ++r) {
        each.rank = r;
        all.push_back(a->generate(each, topo));
      }
      seconds = topo::predict(all, topo, elemSize, model).seconds;
    } catch (const std::exception& e) {
      HOCCL_WARN(kTuning, "cost model failed for {} {} count {}: {}; not considering it", a->name,
                 sched::collName(args.coll), args.count, e.what());
      continue;
    }
    report += fmt::format(" {}={:.1f}us", a->name, seconds * 1e6);
    // A later candidate must be more than 1% faster to replace an earlier (preferred) one: deterministic ties.
    if (!best || seconds < bestTime * 0.99) {
      best = a;
      bestTime = seconds;
    }
  }
  if (!best) best = c.front();
  HOCCL_INFO(kTuning, "{} count {} x {} B on {} ranks: predicted{} -> {}", sched::collName(args.coll), args.count,
             elemSize, args.nranks, report, best->name);
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() >= kMaxCacheEntries) cache.clear();
  cache.emplace(key, best);
  return *best;
}

}  // namespace hoccl::algo
