/*
 * The tuner: the one place that chooses what runs a collective call (see tuner.h).
 *
 * Schedules: the candidate algorithms' schedules for every rank are simulated by the cost model and the fastest
 * wins. A later candidate must be more than 1% faster to replace an earlier, preferred one, or within 1% and
 * sending smaller messages (deterministic ties). Smaller messages win ties because a step's working set then stays
 * in the caches, which the model's constant rates cannot see: on one host HO-Ring's pipelined chunks and the ring
 * are priced the same, and HO-Ring's 1 MiB and 256 KiB chunks ran the all-reduce of 2-16 MiB 1.1-1.9x faster than
 * the ring on 4 and 8 ranks, confirmed in two check-tuner runs (docs/model.md, runs n and r; on 2 ranks 1.7x in run
 * n, a tie in session 16's launches).
 * Predictions are cached per (collective, count, element size, root, chunk, in place, topology, candidates, link
 * model, whether the chunk is chosen).
 * Chunks: unless HOCCL_CHUNK_SIZE is set, an algorithm whose schedule depends on the pipelining chunk (HO-Ring; the
 * ring's broadcast and reduce chains) is priced at each chunk of kChunkChoicesBytes and competes with its best one:
 * smaller chunks overlap the levels more, larger ones pay the per-step cost (LinkModel::step) fewer times. The
 * default chunk (the first) stays unless another is predicted more than kChunkMargin faster: on the emulated cluster
 * the model's predicted gains of pipelining up to 14% did not show in the measurements (docs/model.md, run j).
 * Up to kMaxFullSimRanks = 8 ranks every rank's schedule is simulated; above, the fast model predicts from
 * representative ranks (algo/predict.h), so the choice is made by prediction at any scale.
 * Shortcuts: each transport shortcut that can run the call prices itself with the same link parameters; the
 * fastest of them and the best schedule are compared, the shortcut winning ties (it was measured faster inside its
 * operating range, docs/performance.md).
 * Every rank computes the same choice from the same inputs (topology, arguments, HOCCL_LINK_*, HOCCL_MODEL_FILE and
 * HOCCL_ALGO, or the model HOCCL_TUNE_PROBE=1 measured, which rank 0 hands to every rank at init), so no agreement
 * round is needed per call; those parameters must therefore be equal on all ranks.
 */
#include "algo/tuner.h"

#include "algo/predict.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <mutex>
#include <tuple>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"

namespace hoccl::algo {
namespace {

constexpr size_t kMaxCacheEntries = 4096;

using Key = std::tuple<int, int, size_t, size_t, int, bool, size_t, uint64_t, std::string, std::string, bool>;

uint64_t topologyHash(const topo::Topology& t) {
  std::string s;
  for (int r = 0; r < t.nranks; ++r) s += std::to_string(t.hostOf[r]) + "/" + std::to_string(t.switchOf[r]) + ",";
  return topo::hashId(s);
}

// Every parameter of the model at full precision (the cache key: a model file may differ in any digit).
std::string modelKey(const topo::LinkModel& m) {
  std::string k;
  for (int c = 0; c < hocclNumLinkClasses; ++c) k += fmt::format("{},{},{},", m.alpha[c], m.beta[c], m.step[c]);
  return k + fmt::format("{},{},{},{},{},{},{},{},{},{},{}", m.nic, m.spine, m.spineBurst, m.shmHandoff, m.shmCopy,
                         m.shmMappedCopy, m.shmReduce, m.cores, m.cacheBytes, m.llcBytes, m.cacheGain);
}

// Read at every decision (decisions are cached per call shape by the communicator, tune() per shape here).
topo::LinkModel linkModel() { return topo::LinkModel::fromParams(); }

}  // namespace

topo::Prediction predictAlgorithm(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo,
                                  size_t elemSize, const topo::LinkModel& model) {
  std::vector<sched::Schedule> all;
  all.reserve(static_cast<size_t>(args.nranks));
  sched::CollArgs each = args;
  for (int r = 0; r < args.nranks; ++r) {
    each.rank = r;
    all.push_back(alg.generate(each, topo));
  }
  return topo::predict(all, topo, elemSize, model);
}

bool chunkMatters(const Algorithm& alg, sched::Coll coll) {
  const std::string name = alg.name;
  return name == "ho_ring" || (name == "ring" && (coll == sched::Coll::Broadcast || coll == sched::Coll::Reduce));
}

namespace {

// The chunks (elements) to price alg at: args.chunkCount alone, or with chooseChunk every kChunkChoicesBytes that
// makes a different schedule (chunks at least as large as the call's largest buffer all make one chunk).
std::vector<size_t> chunkChoices(const Algorithm& alg, const sched::CollArgs& args, size_t elemSize, bool chooseChunk) {
  if (!chooseChunk || !chunkMatters(alg, args.coll)) return {args.chunkCount};
  const sched::BufferCounts b = sched::bufferCounts(args);
  const size_t whole = std::max<size_t>(1, std::max(b.input, b.output));
  std::vector<size_t> out;
  bool wholeTried = false;
  for (size_t bytes : kChunkChoicesBytes) {
    const size_t chunk = std::max<size_t>(1, bytes / elemSize);
    if (chunk >= whole) {
      if (wholeTried) continue;
      wholeTried = true;
    }
    out.push_back(chunk);
  }
  return out;
}

// The largest message rank 0's schedule of alg sends, in elements: the tie-break of tune().
size_t largestMessage(const Algorithm& alg, const sched::CollArgs& args, const topo::Topology& topo) {
  sched::CollArgs first = args;
  first.rank = 0;
  size_t most = 0;
  for (const sched::Step& step : alg.generate(first, topo).steps)
    for (const sched::Prim& p : step.prims)
      if (p.kind == sched::PrimKind::Send) most = std::max(most, p.count);
  return most;
}

}  // namespace

Choice tune(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
            const std::vector<const Algorithm*>& c, const topo::LinkModel* given, bool chooseChunk) {
  static std::mutex mutex;
  static std::map<Key, Choice> cache;
  std::string names;
  for (const Algorithm* a : c) names += std::string(a->name) + ",";
  const topo::LinkModel model = given ? *given : linkModel();
  Key key{static_cast<int>(args.coll), args.nranks, args.count,      args.chunkCount, args.root, args.inPlace, elemSize,
          topologyHash(topo),          names,       modelKey(model), chooseChunk};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  Choice best;
  constexpr size_t kNotYet = SIZE_MAX;
  size_t bestMessage = kNotYet;  // largestMessage() of best, once a tie needs it
  std::string report;
  for (const Algorithm* a : c) {
    // This algorithm's chunk: the first (the default) unless another is predicted more than kChunkMargin faster.
    Choice mine;
    double atDefault = 0;
    const std::vector<size_t> chunks = chunkChoices(*a, args, elemSize, chooseChunk);
    for (size_t i = 0; i < chunks.size(); ++i) {
      sched::CollArgs priced = args;
      priced.chunkCount = chunks[i];
      double seconds;
      try {
        seconds = predict(*a, priced, topo, elemSize, model).seconds;
      } catch (const std::exception& e) {
        HOCCL_WARN(kTuning, "cost model failed for {} {} count {} chunk {}: {}; not considering it", a->name,
                   sched::collName(args.coll), args.count, chunks[i], e.what());
        continue;
      }
      report += chooseChunk && chunkMatters(*a, args.coll)
                    ? fmt::format(" {}@{}B={:.1f}us", a->name, chunks[i] * elemSize, seconds * 1e6)
                    : fmt::format(" {}={:.1f}us", a->name, seconds * 1e6);
      if (i == 0) atDefault = seconds;
      const bool beatsDefault = i == 0 || atDefault == 0 || seconds < atDefault * (1 - kChunkMargin);
      if (beatsDefault && (!mine.algorithm || seconds < mine.seconds * 0.99))
        mine = Choice{nullptr, a, seconds, chunks[i]};
    }
    if (!mine.algorithm) continue;
    if (!best.algorithm || mine.seconds < best.seconds * 0.99) {
      best = mine;
      bestMessage = kNotYet;
      continue;
    }
    if (mine.seconds > best.seconds * 1.01) continue;
    // A tie: the smaller messages win (see the file comment).
    auto largest = [&](const Choice& ch) {
      sched::CollArgs priced = args;
      priced.chunkCount = ch.chunkCount;
      return largestMessage(*ch.algorithm, priced, topo);
    };
    if (bestMessage == kNotYet) bestMessage = largest(best);
    const size_t mineMessage = largest(mine);
    if (mineMessage < bestMessage) {
      report += fmt::format(" ({} wins the tie: messages of {} B against {} B)", a->name, mineMessage * elemSize,
                            bestMessage * elemSize);
      best = mine;
      bestMessage = mineMessage;
    }
  }
  if (!best.algorithm) best = Choice{nullptr, c.front(), 0, args.chunkCount};
  HOCCL_INFO(kTuning, "{} count {} x {} B on {} ranks: predicted{} -> {}{}", sched::collName(args.coll), args.count,
             elemSize, args.nranks, report, best.algorithm->name,
             chooseChunk && chunkMatters(*best.algorithm, args.coll)
                 ? fmt::format(" with {} B chunks", best.chunkCount * elemSize)
                 : std::string());
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() >= kMaxCacheEntries) cache.clear();
  cache.emplace(key, best);
  return best;
}

namespace {
// Every transport shortcut HOCCL_ALGO may name (transports/shm: shm_small, shm_single_copy).
constexpr const char* kShortcutNames[] = {"small", "single_copy"};
}  // namespace

std::string shortcutNames() {
  std::string names;
  for (const char* n : kShortcutNames) names += (names.empty() ? "" : ", ") + std::string(n);
  return names;
}

bool isShortcutName(const std::string& name) {
  for (const char* n : kShortcutNames)
    if (name == n) return true;
  return false;
}

Choice decide(const transport::CollCall& call, const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
              const std::vector<std::unique_ptr<transport::Shortcut>>& shortcuts, const topo::LinkModel* given) {
  static const std::string forced = params::ALGO.get();
  // HOCCL_CHUNK_SIZE set: its chunk (args.chunkCount) is forced; otherwise the predictions choose it.
  static const bool chooseChunk = !params::CHUNK_SIZE.isSet();
  const bool forcedShortcut = isShortcutName(forced);
  if (forcedShortcut) {
    for (const auto& s : shortcuts)
      if (forced == s->name() && s->canRun(call))
        return Choice{s.get(), nullptr, s->predictSeconds(call, given ? *given : linkModel()), args.chunkCount};
  } else if (!forced.empty()) {
    const Algorithm& alg = choose(args, topo, elemSize);  // an algorithm, or an error listing the valid names
    if (!chooseChunk || !chunkMatters(alg, args.coll)) return Choice{nullptr, &alg, 0, args.chunkCount};
    return tune(args, topo, elemSize, {&alg}, given, true);  // forced algorithm, predicted chunk
  }
  // The schedules first (cached), then any shortcut predicted at least as fast.
  auto candidates = algo::candidates(args, topo);
  if (candidates.empty()) throwInternalError(std::string("no algorithm implements ") + sched::collName(args.coll));
  Choice best = tune(args, topo, elemSize, candidates, given, chooseChunk);
  if (!forced.empty()) return best;  // a forced shortcut that cannot run this call: the schedules decide
  const topo::LinkModel model = given ? *given : linkModel();
  std::string report;
  for (const auto& s : shortcuts) {
    if (!s->canRun(call) || !s->choosableOnOrdinaryBuffers(call)) continue;
    const double seconds = s->predictSeconds(call, model);
    report += fmt::format(" {}={:.1f}us", s->name(), seconds * 1e6);
    if (best.shortcut ? seconds < best.seconds : (best.seconds == 0 || seconds <= best.seconds))
      best = Choice{s.get(), nullptr, seconds, args.chunkCount};
  }
  // Registered buffers: a shortcut's own path for them may beat the schedule that ordinary buffers get.
  for (const auto& s : shortcuts) {
    if (!best.algorithm || best.seconds == 0 || !s->canRun(call)) continue;
    const std::optional<double> seconds = s->predictRegisteredSeconds(call, model);
    if (!seconds) continue;
    report += fmt::format(" {} (registered)={:.1f}us", s->name(), *seconds * 1e6);
    if (*seconds < best.seconds && (!best.ifRegistered || *seconds < best.registeredSeconds)) {
      best.ifRegistered = s.get();
      best.registeredSeconds = *seconds;
    }
  }
  if (!report.empty())
    HOCCL_INFO(kTuning, "{} count {} x {} B on {} ranks: shortcuts{} -> {}{}", sched::collName(args.coll), args.count,
               elemSize, args.nranks, report, best.name(),
               best.ifRegistered ? fmt::format(", {} where every rank registered", best.ifRegistered->name())
                                 : std::string());
  return best;
}

namespace {

// The best schedule for args among the algorithms that implement it, `except` left out (its chunk chosen unless
// HOCCL_CHUNK_SIZE forces it); nullopt when none is left. For the online choice's variants.
std::optional<Choice> bestSchedule(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
                                   const topo::LinkModel& model, const Algorithm* except = nullptr) {
  static const bool chooseChunk = !params::CHUNK_SIZE.isSet();
  auto candidates = algo::candidates(args, topo);
  candidates.erase(std::remove(candidates.begin(), candidates.end(), except), candidates.end());
  if (candidates.empty()) return std::nullopt;
  return tune(args, topo, elemSize, candidates, &model, chooseChunk);
}

}  // namespace

std::optional<Choice> runnerUp(const transport::CollCall& call, const sched::CollArgs& args, const topo::Topology& topo,
                               size_t elemSize, const std::vector<std::unique_ptr<transport::Shortcut>>& shortcuts,
                               const topo::LinkModel& model, const Choice& chosen) {
  if (!params::ALGO.get().empty()) return std::nullopt;  // forced: nothing to try
  if (chosen.shortcut) {
    if (!chosen.shortcut->worthTryingOnline(call)) return std::nullopt;
    return bestSchedule(args, topo, elemSize, model);
  }
  std::optional<Choice> best;
  for (const auto& s : shortcuts) {
    if (!s->canRun(call) || !s->worthTryingOnline(call)) continue;
    const double seconds = s->predictSeconds(call, model);
    if (!best || seconds < best->seconds) best = Choice{s.get(), nullptr, seconds, args.chunkCount};
  }
  return best;
}

std::optional<Choice> otherSchedule(const sched::CollArgs& args, const topo::Topology& topo, size_t elemSize,
                                    const topo::LinkModel& model, const Choice& schedule) {
  if (!params::ALGO.get().empty() || !schedule.algorithm) return std::nullopt;
  return bestSchedule(args, topo, elemSize, model, schedule.algorithm);
}

}  // namespace hoccl::algo
