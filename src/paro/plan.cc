// PaRO mapper arithmetic: memory, the step plan, the alpha-beta time model, the ranking. See plan.h for the step.
#include "paro/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/error.h"

namespace hoccl::paro {

const char* collName(Coll coll) {
  switch (coll) {
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AllReduce: return "AllReduce";
  }
  return "?";
}

const char* commKindName(CommKind kind) {
  switch (kind) {
    case CommKind::Intra: return "intra";
    case CommKind::Inter: return "inter";
    case CommKind::Global: return "global";
  }
  return "?";
}

const char* phaseName(Phase phase) {
  switch (phase) {
    case Phase::GatherParams: return "gather params";
    case Phase::ReduceGrads: return "reduce grads";
    case Phase::SyncGrads: return "sync grads";
    case Phase::RebuildParams: return "rebuild params";
  }
  return "?";
}

namespace {

double divisor(const Layout& l, Level level) {
  switch (level) {
    case Level::N: return 1.0;
    case Level::I: return static_cast<double>(l.groupSize);
    case Level::G: return static_cast<double>(l.nranks);
  }
  return 1.0;
}

// Builds the plan entries; counts are per call, in elements of the padded buffers.
class Builder {
 public:
  Builder(const Layout& l, Plan& plan, int microSteps) : l_(l), plan_(plan), a_(microSteps) {}

  void add(Phase ph, Coll c, CommKind k, State t, uint64_t count, uint32_t e, When w, int per) {
    const int n = k == CommKind::Intra ? l_.groupSize : k == CommKind::Inter ? l_.ngroups : l_.nranks;
    if (n <= 1) return;  // a one-rank communicator moves nothing
    PlanEntry pe{ph, c, k, n, t};
    pe.count = count;
    pe.elemBytes = e;
    const uint64_t un = static_cast<uint64_t>(n);
    pe.bytes = (c == Coll::AllReduce ? count : un * count) * e;
    pe.sentPerRank = (c == Coll::AllReduce ? 2 * (un - 1) * (count / un) : (un - 1) * count) * e;
    pe.when = w;
    pe.perOccurrence = per;
    pe.perStep = static_cast<uint64_t>(per) * (w == When::MicroStep ? static_cast<uint64_t>(a_) : 1);
    plan_.entries.push_back(pe);
  }

 private:
  const Layout& l_;
  Plan& plan_;
  int a_;
};

}  // namespace

Memory memoryPerRank(const Layout& layout, const Strategy& s, const ModelSize& size) {
  Memory m;
  m.p = size.bytesP * static_cast<double>(size.params) / divisor(layout, s.p);
  m.g = size.bytesG * static_cast<double>(size.trainable) / divisor(layout, s.g);
  m.os = size.bytesOS * static_cast<double>(size.trainable) / divisor(layout, s.os);
  m.total = m.p + m.g + m.os;
  return m;
}

Plan makePlan(const Layout& layout, const Strategy& s, const ModelSize& size, int microSteps) {
  if (microSteps < 1) throwInvalidArgument(fmt::format("PaRO: {} micro-steps: need at least 1", microSteps));
  if (size.trainable > size.params)
    throwInvalidArgument(
        fmt::format("PaRO: {} trainable parameters is more than the {} parameters", size.trainable, size.params));
  Plan plan;
  plan.strategy = s;
  plan.microSteps = microSteps;
  Builder b(layout, plan, microSteps);
  const uint64_t ng = static_cast<uint64_t>(layout.ngroups);
  const uint64_t bP = paddedCount(size.params, layout.nranks) / static_cast<uint64_t>(std::max(layout.nranks, 1));
  const uint64_t bT = paddedCount(size.trainable, layout.nranks) / static_cast<uint64_t>(std::max(layout.nranks, 1));
  const auto P = State::Params, G = State::Grads;
  const auto intra = CommKind::Intra, inter = CommKind::Inter;
  const uint32_t eP = size.bytesP, eG = size.bytesG;
  using C = Coll;
  // Per micro-step: gather parameters for forward and backward.
  if (s.p == Level::G) b.add(Phase::GatherParams, C::AllGather, inter, P, bP, eP, When::MicroStep, 2);
  if (s.p != Level::N) b.add(Phase::GatherParams, C::AllGather, intra, P, ng * bP, eP, When::MicroStep, 2);
  // Per micro-step: reduce the fresh gradient to G's level.
  if (s.g != Level::N) b.add(Phase::ReduceGrads, C::ReduceScatter, intra, G, ng * bT, eG, When::MicroStep, 1);
  if (s.g == Level::G) b.add(Phase::ReduceGrads, C::ReduceScatter, inter, G, bT, eG, When::MicroStep, 1);
  // Per step: bring the accumulated gradient from G's level to OS's level.
  const auto sync = [&](C c, CommKind k, uint64_t count) {
    b.add(Phase::SyncGrads, c, k, G, count, eG, When::Step, 1);
  };
  if (s.g == Level::N) {
    if (s.os == Level::N) {
      sync(C::AllReduce, CommKind::Global, bT * static_cast<uint64_t>(layout.nranks));
    } else {
      sync(C::ReduceScatter, intra, ng * bT);
      if (s.os == Level::I) sync(C::AllReduce, inter, ng * bT);
      else sync(C::ReduceScatter, inter, bT);
    }
  } else if (s.g == Level::I) {
    if (s.os == Level::G) {
      sync(C::ReduceScatter, inter, bT);
    } else {
      sync(C::AllReduce, inter, ng * bT);
      if (s.os == Level::N) sync(C::AllGather, intra, ng * bT);
    }
  } else {
    if (s.os != Level::G) sync(C::AllGather, inter, bT);
    if (s.os == Level::N) sync(C::AllGather, intra, ng * bT);
  }
  // Per step: rebuild P's level from the updated OS shard (only the trainable part changes).
  const auto rebuild = [&](C c, CommKind k, uint64_t count) {
    b.add(Phase::RebuildParams, c, k, P, count, eP, When::Step, 1);
  };
  if (s.os == Level::G && s.p != Level::G) rebuild(C::AllGather, inter, bT);
  if ((s.os == Level::G || s.os == Level::I) && s.p == Level::N) rebuild(C::AllGather, intra, ng * bT);
  return plan;
}

uint64_t Plan::sentPerRankPerStep() const {
  uint64_t total = 0;
  for (const auto& e : entries) total += e.sentPerRank * e.perStep;
  return total;
}

namespace {

// The concurrent instances of a communicator kind, each as its ranks in communicator order.
std::vector<std::vector<int>> instances(const Layout& l, CommKind kind) {
  std::vector<std::vector<int>> out;
  if (kind == CommKind::Intra) return l.members;
  if (kind == CommKind::Inter) {
    for (int k = 0; k < l.groupSize; ++k) {
      out.emplace_back();
      for (int g = 0; g < l.ngroups; ++g) out.back().push_back(l.rankAt(g, k));
    }
    return out;
  }
  out.emplace_back();
  for (int r = 0; r < l.nranks; ++r) out[0].push_back(r);
  return out;
}

// The ring the library runs on a communicator whose ranks are `members` (in communicator order): hoccl's ring
// visits switch by switch, host by host (algo::ringOrder), numbering both by first appearance in the communicator.
std::vector<int> ringOf(const Layout& l, std::vector<int> members) {
  std::map<int, int> sw, host;
  for (int r : members) {
    sw.emplace(l.topo.switchOf[r], static_cast<int>(sw.size()));
    host.emplace(l.topo.hostOf[r], static_cast<int>(host.size()));
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    const int sa = sw[l.topo.switchOf[a]], sb = sw[l.topo.switchOf[b]];
    if (sa != sb) return sa < sb;
    return host[l.topo.hostOf[a]] < host[l.topo.hostOf[b]];
  });
  return members;
}

}  // namespace

std::array<uint64_t, hocclNumLinkClasses> Plan::sentByClass(const Layout& layout, int rank) const {
  std::array<uint64_t, hocclNumLinkClasses> out{};
  for (const auto& e : entries) {
    for (const auto& members : instances(layout, e.comm)) {
      const std::vector<int> ring = ringOf(layout, members);
      auto it = std::find(ring.begin(), ring.end(), rank);
      if (it == ring.end()) continue;
      const size_t pos = static_cast<size_t>(it - ring.begin());
      const int next = ring[(pos + 1) % ring.size()];
      out[layout.topo.linkClass(rank, next)] += e.sentPerRank * e.perStep;
    }
  }
  return out;
}

LinkModel LinkModel::defaults() {
  LinkModel m;
  m.alpha = {0.0, 2e-6, 5e-6, 10e-6};
  m.bw = {0.0, 150e9, 50e9, 0.0};
  return m;
}

double predictCallTime(const Layout& layout, const PlanEntry& e, const LinkModel& links) {
  std::map<std::pair<int, int>, double> load;  // (class, owner) -> bytes
  double alpha = 0;
  const auto& t = layout.topo;
  for (const auto& members : instances(layout, e.comm)) {
    const std::vector<int> ring = ringOf(layout, members);
    for (size_t i = 0; i < ring.size(); ++i) {
      const int r = ring[i], q = ring[(i + 1) % ring.size()];
      const hocclLinkClass_t c = t.linkClass(r, q);
      alpha = std::max(alpha, links.alpha[c]);
      const double bytes = static_cast<double>(e.sentPerRank);
      if (c == hocclLinkIntraHost) load[{hocclLinkIntraHost, r}] += bytes;
      if (c == hocclLinkIntraSwitch || c == hocclLinkInterSwitch) load[{hocclLinkIntraSwitch, t.hostOf[r]}] += bytes;
      if (c == hocclLinkInterSwitch) load[{hocclLinkInterSwitch, t.switchOf[r]}] += bytes;
    }
  }
  double beta = 0;
  for (const auto& [key, bytes] : load) {
    const double bw = links.bw[key.first];
    if (bw > 0) beta = std::max(beta, bytes / bw);
  }
  const double steps = static_cast<double>(e.coll == Coll::AllReduce ? 2 * (e.commSize - 1) : e.commSize - 1);
  return steps * alpha + beta;
}

double predictStepTime(const Layout& layout, const Plan& plan, const LinkModel& links) {
  double total = 0;
  for (const auto& e : plan.entries) total += predictCallTime(layout, e, links) * static_cast<double>(e.perStep);
  return total;
}

std::vector<Ranked> rankStrategies(const Layout& layout, const ModelSize& size, int microSteps, double budget,
                                   const LinkModel& links) {
  std::vector<Ranked> out;
  for (const Strategy& s : allStrategies()) {
    Ranked r;
    r.strategy = s;
    r.memory = memoryPerRank(layout, s, size);
    const Plan plan = makePlan(layout, s, size, microSteps);
    r.seconds = predictStepTime(layout, plan, links);
    r.sentPerRank = plan.sentPerRankPerStep();
    r.fits = budget <= 0 || r.memory.total <= budget;
    out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const Ranked& a, const Ranked& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits && a.seconds != b.seconds) return a.seconds < b.seconds;
    return a.memory.total < b.memory.total;
  });
  return out;
}

}  // namespace hoccl::paro
