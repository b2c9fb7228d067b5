// Predictions at any scale (see predict.h).
#include "algo/predict.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "algo/tuner.h"

namespace hoccl::algo {

topo::FastOptions fastOptions(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo) {
  topo::FastOptions o;
  const bool rooted = args.coll == sched::Coll::Broadcast || args.coll == sched::Coll::Reduce ||
                      args.coll == sched::Coll::Gather || args.coll == sched::Coll::Scatter;
  if (rooted) {
    o.reps = topo::Representatives::All;
  } else if ((std::strcmp(alg.name, "ho_ring") == 0 || std::strcmp(alg.name, "direct") == 0) &&
             topo::hierarchy(topo).note == "regular") {
    // HO-Ring's schedule maps onto itself under every coordinate shift of a regular hierarchy; direct's unrooted
    // schedules are the complete graph in one step (then local combines), which every relabelling of ranks that
    // keeps hosts and switches maps onto itself. Either way rank 0 behaves like every rank.
    o.reps = topo::Representatives::OneRank;
  } else if (std::strcmp(alg.name, "ring") == 0 && topo.nhosts == 1) {
    // One host: every hop of the ring uses the host's own link class, so a rotation of the ring maps the schedule
    // onto itself and rank 0 behaves like every rank. Simulating the whole host instead costs every rank of a
    // 1,024-rank host 2,046 steps of each of 1,024 ranks at its first call (tens of MB each, at the same time).
    o.reps = topo::Representatives::OneRank;
  } else {
    o.reps = topo::Representatives::OneSwitchEach;
  }
  return o;
}

topo::Prediction predictFast(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo,
                             size_t elemSize, const topo::LinkModel& model) {
  // Ring broadcast and reduce are chains whose ranks start one step apart, which the lockstep model cannot align;
  // they are cheap to simulate exactly (as many concurrent flows as chunks), so the reference runs them.
  const bool chain = std::strcmp(alg.name, "ring") == 0 &&
                     (args.coll == sched::Coll::Broadcast || args.coll == sched::Coll::Reduce);
  if (chain) return predictAlgorithm(alg, args, topo, elemSize, model);
  auto gen = [&](int r) {
    sched::CollArgs each = args;
    each.rank = r;
    return alg.generate(each, topo);
  };
  return topo::predictFast(gen, topo, elemSize, model, fastOptions(alg, args, topo));
}

int maxRanksPerHost(const topo::Topology& topo) {
  std::vector<int> count(static_cast<size_t>(std::max(topo.nhosts, 1)), 0);
  int most = 0;
  for (int h : topo.hostOf)
    if (h >= 0 && h < static_cast<int>(count.size())) most = std::max(most, ++count[static_cast<size_t>(h)]);
  return most;
}

topo::Prediction predict(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
                         const topo::LinkModel& given) {
  // Ranks taking turns on a host's cores: every rank's CPU work costs more (a no-op when model.cores is 0 or enough).
  // And a call whose buffers fit the host's last-level cache has no cache term (LinkModel::forCall).
  const int ranksOnHost = maxRanksPerHost(topo);
  const sched::BufferCounts counts = sched::bufferCounts(args);
  const double perRank = static_cast<double>(args.inPlace ? std::max(counts.input, counts.output)
                                                          : counts.input + counts.output) *
                         static_cast<double>(elemSize);
  const topo::LinkModel model = given.crowded(ranksOnHost).forCall(perRank * ranksOnHost);
  if (topo.nranks <= kMaxFullSimRanks) return predictAlgorithm(alg, args, topo, elemSize, model);
  return predictFast(alg, args, topo, elemSize, model);
}

double cacheRatio(const CachePair& pair, const topo::Topology& topo, size_t elemSize, const topo::LinkModel& model,
                  double gain) {
  topo::LinkModel m = model;
  m.cacheGain = gain;
  return predict(*pair.a, pair.aArgs, topo, elemSize, m).seconds /
         predict(*pair.b, pair.bArgs, topo, elemSize, m).seconds;
}

double fitCacheGain(double measuredRatio, const CachePair& pair, const topo::Topology& topo, size_t elemSize,
                    const topo::LinkModel& model, double lo, double hi) {
  auto ratio = [&](double gain) { return cacheRatio(pair, topo, elemSize, model, gain); };
  if (measuredRatio >= ratio(lo)) return lo;
  if (measuredRatio <= ratio(hi)) return hi;
  for (int i = 0; i < 40; ++i) {  // (hi - lo) / 2^40: far below what a timing resolves
    const double mid = (lo + hi) / 2;
    (ratio(mid) > measuredRatio ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace hoccl::algo
