// The cost model's fast path (see fast_model.h).
//
// Two passes over the representatives' schedules, generated once: pass 1 keeps a compact summary (each step's sends
// and the cost of its local prims; about 100 MB for a flat ring on 16,384 ranks, whose 256 representatives have
// 32,766 steps each).
// Pass 1 counts, per global step, the flows on every shared link the representatives touch: a host's NIC out and in, a
// switch's uplink out and in, and each representative's receive port. A flow to a rank outside the representatives is
// counted on the image of its receiver: the rank at the same place (host index in its switch, local index) in the
// representative switch of the same shape. A representative that stands for several ranks (OneRank: rank 0 for its
// whole host and switch) counts with that multiplicity on the host's and switch's links. Pass 2 prices each
// representative's step as a small fluid simulation of its own sends: each starts after the alpha and the per-step cost
// of its link class (LinkModel::startup, as in the reference) and flows at min(beta of its class, capacity / users)
// over every link it crosses, where the users of a link are its pass-1 count scaled by the share of the
// representative's flows on it that are still running (when one of them ends, the others speed up: the same max-min
// sharing the reference simulator applies, assuming the other ranks' flows on the link end when the representative's
// do), with the reference's cached rate for data the sender wrote the step before (LinkModel::streamedBytes). Local prims take alpha(self) + bytes / beta(self), concurrently with network sends and before intra-host ones
// (one core copies both, as in the reference). A global step lasts as long as its slowest representative; the
// prediction is the sum over global steps (lockstep).
#include "sched/fast_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "base/error.h"
#include "sched/fresh_data.h"

namespace hoccl::topo {
namespace {

using sched::PrimKind;

// Counts per global step, grown on demand.
struct Counts {
  std::vector<float> v;
  void add(size_t g, float w) {
    if (g >= v.size()) v.resize(g + 1, 0.f);
    v[g] += w;
  }
  float at(size_t g) const { return g < v.size() ? v[g] : 0.f; }
};

struct Shape {
  std::vector<std::vector<int>> hostsOfSwitch;  // switch -> hosts in order
  std::vector<std::vector<int>> ranksOfHost;    // host -> ranks in rank order
  std::vector<int> hostIndex;                   // host -> index among its switch's hosts
};

Shape shapeOf(const Topology& t) {
  Shape s;
  s.hostsOfSwitch.resize(t.nswitches);
  s.ranksOfHost.resize(t.nhosts);
  s.hostIndex.assign(t.nhosts, -1);
  for (int r = 0; r < t.nranks; ++r) {
    int h = t.hostOf[r];
    if (s.ranksOfHost[h].empty()) {
      s.hostIndex[h] = static_cast<int>(s.hostsOfSwitch[t.switchOf[r]].size());
      s.hostsOfSwitch[t.switchOf[r]].push_back(h);
    }
    s.ranksOfHost[h].push_back(r);
  }
  return s;
}

// Which ranks are simulated and what every rank, host and switch maps to.
struct RepSet {
  std::vector<int> reps;                   // representative ranks
  std::vector<double> mult;                // per representative: ranks it stands for (byte and message totals)
  std::vector<int> repIndex;               // rank -> index in reps, -1 if none
  std::vector<int> rankImage;              // rank -> representative rank standing for it
  std::vector<int> hostImage;              // host -> host whose counts stand for it
  std::vector<int> switchImage;            // switch -> switch whose counts stand for it
  float hostWeight = 1, switchWeight = 1;  // flows a representative's flow stands for on its host's / switch's links
};

RepSet chooseReps(const Topology& t, Representatives kind) {
  RepSet rs;
  const int n = t.nranks;
  rs.repIndex.assign(n, -1);
  if (kind == Representatives::All) {
    for (int r = 0; r < n; ++r) rs.reps.push_back(r);
    rs.mult.assign(n, 1.0);
    for (int r = 0; r < n; ++r) rs.repIndex[r] = r;
    rs.rankImage = rs.repIndex;
    rs.hostImage.resize(t.nhosts);
    for (int h = 0; h < t.nhosts; ++h) rs.hostImage[h] = h;
    rs.switchImage.resize(t.nswitches);
    for (int s = 0; s < t.nswitches; ++s) rs.switchImage[s] = s;
    return rs;
  }
  Shape sh = shapeOf(t);
  if (kind == Representatives::OneRank) {
    rs.reps = {0};
    rs.mult = {static_cast<double>(n)};
    rs.repIndex[0] = 0;
    rs.rankImage.assign(n, 0);
    rs.hostImage.assign(t.nhosts, t.hostOf[0]);
    rs.switchImage.assign(t.nswitches, t.switchOf[0]);
    rs.hostWeight = static_cast<float>(sh.ranksOfHost[t.hostOf[0]].size());
    rs.switchWeight = 0;
    for (int h : sh.hostsOfSwitch[t.switchOf[0]]) rs.switchWeight += static_cast<float>(sh.ranksOfHost[h].size());
    return rs;
  }
  // One switch per distinct shape (ranks per host, in host order).
  std::map<std::vector<int>, int> firstOfShape;
  std::map<int, int> switchesOfRep;
  rs.switchImage.resize(t.nswitches);
  for (int s = 0; s < t.nswitches; ++s) {
    std::vector<int> sig;
    for (int h : sh.hostsOfSwitch[s]) sig.push_back(static_cast<int>(sh.ranksOfHost[h].size()));
    auto [it, fresh] = firstOfShape.emplace(sig, s);
    rs.switchImage[s] = it->second;
    ++switchesOfRep[it->second];
  }
  rs.hostImage.resize(t.nhosts);
  for (int h = 0; h < t.nhosts; ++h) {
    int s = t.switchOf[sh.ranksOfHost[h][0]];
    rs.hostImage[h] = sh.hostsOfSwitch[rs.switchImage[s]][sh.hostIndex[h]];
  }
  for (int r = 0; r < n; ++r) {
    if (rs.switchImage[t.switchOf[r]] == t.switchOf[r]) {
      rs.repIndex[r] = static_cast<int>(rs.reps.size());
      rs.reps.push_back(r);
      rs.mult.push_back(switchesOfRep[t.switchOf[r]]);
    }
  }
  rs.rankImage.resize(n);
  for (int r = 0; r < n; ++r) {
    const auto& ranks = sh.ranksOfHost[rs.hostImage[t.hostOf[r]]];
    rs.rankImage[r] = ranks[static_cast<size_t>(t.localIndex[r]) % ranks.size()];
  }
  return rs;
}

// What pass 2 needs of one representative's schedule, kept from pass 1 so that it is generated once.
struct Summary {
  struct Send {
    int peer;
    float bytes;  // the bytes its rate applies to (LinkModel::streamedBytes)
  };
  std::vector<uint32_t> stepEnd;                  // step k's sends are sends[stepEnd[k-1] .. stepEnd[k])
  std::vector<Send> sends;                        // in step order
  std::vector<std::pair<uint32_t, float>> local;  // (step, seconds of its slowest local prim), steps that have one
};

// One link of a step's fluid simulation.
struct Link {
  int type;  // 0 port out, 1 port in, 2 NIC out, 3 NIC in, 4 uplink out, 5 uplink in
  int id;
  double cap = 0, users = 0;  // capacity, flows on it (pass-1 count)
  int mine = 0, active = 0;   // the representative's flows on it: all, still running
};

struct Flow {
  double start, remaining, beta, rate = 0;
  int links[6];
  int nlinks = 0;
  bool started = false, done = false;
};

class FastSim {
 public:
  FastSim(const std::function<sched::Schedule(int)>& gen, const Topology& t, size_t elemSize, const LinkModel& m,
          const FastOptions& o)
      : gen_(gen), t_(t), elem_(static_cast<double>(elemSize)), m_(m), o_(o), rs_(chooseReps(t, o.reps)) {}

  Prediction run() {
    recvs_.resize(rs_.reps.size());
    summaries_.resize(rs_.reps.size());
    nicOut_.resize(t_.nhosts);
    nicIn_.resize(t_.nhosts);
    upOut_.resize(t_.nswitches);
    upIn_.resize(t_.nswitches);
    for (size_t i = 0; i < rs_.reps.size(); ++i) count(i);
    for (size_t i = 0; i < rs_.reps.size(); ++i) price(i);
    for (double d : stepTime_) pred_.seconds += d;
    return pred_;
  }

 private:
  void count(size_t i) {
    const int r = rs_.reps[i];
    const sched::Schedule s = gen_(r);
    pred_.maxSteps = std::max(pred_.maxSteps, s.steps.size());
    double messages = 0;
    Summary& sum = summaries_[i];
    sum.stepEnd.reserve(s.steps.size());
    for (size_t k = 0; k < s.steps.size(); ++k) {
      const size_t g = k;
      double local = 0;
      for (const auto& p : s.steps[k].prims) {
        if (p.kind == PrimKind::Copy || p.kind == PrimKind::Reduce) {
          bool same = p.kind == PrimKind::Copy && p.src == p.dst && p.srcOff == p.dstOff;
          if (!same)
            local = std::max(local, m_.startup(hocclLinkSelf) + static_cast<double>(p.count) * elem_ / m_.beta[0]);
        } else if (p.kind == PrimKind::Recv || p.kind == PrimKind::RecvReduce) {
          recvs_[i].add(g, 1.f);
        } else if (p.kind == PrimKind::Send) {
          checkPeer(r, p.peer, k);
          const hocclLinkClass_t cls = t_.linkClass(r, p.peer);
          const bool fresh = sched::sendsFreshData(k ? &s.steps[k - 1] : nullptr, p);
          sum.sends.push_back(
              {p.peer, static_cast<float>(m_.streamedBytes(static_cast<double>(p.count) * elem_, cls, fresh))});
          bytes_[cls] += static_cast<double>(p.count) * elem_ * rs_.mult[i];
          messages += rs_.mult[i];
          if (cls >= hocclLinkIntraSwitch) {
            nicOut_[t_.hostOf[r]].add(g, rs_.hostWeight);
            nicIn_[rs_.hostImage[t_.hostOf[p.peer]]].add(g, rs_.hostWeight);
          }
          if (cls == hocclLinkInterSwitch) {
            upOut_[t_.switchOf[r]].add(g, rs_.switchWeight);
            upIn_[rs_.switchImage[t_.switchOf[p.peer]]].add(g, rs_.switchWeight);
          }
        }
      }
      sum.stepEnd.push_back(static_cast<uint32_t>(sum.sends.size()));
      if (local > 0) sum.local.emplace_back(static_cast<uint32_t>(k), static_cast<float>(local));
    }
    pred_.messages += static_cast<size_t>(messages + 0.5);
    for (int c = 0; c < hocclNumLinkClasses; ++c) pred_.bytes[c] = bytes_[c];
  }

  void checkPeer(int r, int peer, size_t k) const {
    if (peer < 0 || peer >= t_.nranks || peer == r)
      throwInvalidArgument(fmt::format("cost model: rank {} step {} names peer {}", r, k, peer));
  }

  int link(int type, int id, double cap, double users) {
    const long long key = static_cast<long long>(id) * 8 + type;
    auto [it, fresh] = linkIndex_.emplace(key, static_cast<int>(links_.size()));
    if (!fresh) {
      ++links_[it->second].mine;
      return it->second;
    }
    links_.push_back(Link{type, id, cap, std::max(users, 1.0), 1, 0});
    return it->second;
  }

  void price(size_t i) {
    const int r = rs_.reps[i];
    Summary& sum = summaries_[i];
    const double port = m_.beta[hocclLinkIntraHost];
    size_t nextLocal = 0;
    for (size_t k = 0; k < sum.stepEnd.size(); ++k) {
      const size_t g = k;
      links_.clear();
      linkIndex_.clear();
      flows_.clear();
      double local = 0;
      if (nextLocal < sum.local.size() && sum.local[nextLocal].first == k) local = sum.local[nextLocal++].second;
      const uint32_t begin = k ? sum.stepEnd[k - 1] : 0, end = sum.stepEnd[k];
      const int sends = static_cast<int>(end - begin);
      if (sends == 1) {  // one flow (every step of a flat ring): priced directly, as flowsEnd() would, without maps
        const bool afterLocal = t_.linkClass(r, sum.sends[begin].peer) == hocclLinkIntraHost;
        const double flow = singleFlowEnd(r, sum.sends[begin], g, port);
        const double d = afterLocal ? local + flow : std::max(local, flow);
        if (g >= stepTime_.size()) stepTime_.resize(g + 1, 0.0);
        stepTime_[g] = std::max(stepTime_[g], d);
        continue;
      }
      for (uint32_t j = begin; j < end; ++j) {
        const int peer = sum.sends[j].peer;
        const hocclLinkClass_t cls = t_.linkClass(r, peer);
        const double start = m_.startup(cls) + (cls == hocclLinkIntraHost ? local : 0.0);
        Flow f{start, sum.sends[j].bytes, m_.beta[cls], 0, {}, 0, false, false};
        const int img = rs_.rankImage[peer];
        f.links[f.nlinks++] = link(0, r, port, sends);
        f.links[f.nlinks++] = link(1, img, port, recvs_[rs_.repIndex[img]].at(g));
        if (cls >= hocclLinkIntraSwitch) {
          const int hs = t_.hostOf[r], hd = rs_.hostImage[t_.hostOf[peer]];
          f.links[f.nlinks++] = link(2, hs, m_.nic, nicOut_[hs].at(g));
          f.links[f.nlinks++] = link(3, hd, m_.nic, nicIn_[hd].at(g));
        }
        if (cls == hocclLinkInterSwitch) {
          const int ss = t_.switchOf[r], sd = rs_.switchImage[t_.switchOf[peer]];
          f.links[f.nlinks++] = link(4, ss, m_.spine, upOut_[ss].at(g));
          f.links[f.nlinks++] = link(5, sd, m_.spine, upIn_[sd].at(g));
        }
        flows_.push_back(f);
      }
      const double d = std::max(local, flowsEnd());
      if (g >= stepTime_.size()) stepTime_.resize(g + 1, 0.0);
      stepTime_[g] = std::max(stepTime_[g], d);
    }
    sum = Summary{};  // free it
  }

  // A step's only flow: alpha, then the bytes at the smallest of its class's beta and its share of every link it
  // crosses (the pass-1 counts; with one flow of its own the representative has nothing to speed up when done).
  double singleFlowEnd(int r, const Summary::Send& s, size_t g, double port) const {
    const hocclLinkClass_t cls = t_.linkClass(r, s.peer);
    const int img = rs_.rankImage[s.peer];
    auto share = [](double cap, double users) { return cap / std::max(users, 1.0); };
    double rate = std::min(m_.beta[cls], share(port, 1.0));
    rate = std::min(rate, share(port, recvs_[rs_.repIndex[img]].at(g)));
    if (cls >= hocclLinkIntraSwitch) {
      const int hs = t_.hostOf[r], hd = rs_.hostImage[t_.hostOf[s.peer]];
      rate = std::min({rate, share(m_.nic, nicOut_[hs].at(g)), share(m_.nic, nicIn_[hd].at(g))});
    }
    if (cls == hocclLinkInterSwitch) {
      const int ss = t_.switchOf[r], sd = rs_.switchImage[t_.switchOf[s.peer]];
      rate = std::min({rate, share(m_.spine, upOut_[ss].at(g)), share(m_.spine, upIn_[sd].at(g))});
    }
    return m_.startup(cls) + s.bytes / rate;
  }

  // When the last of the step's flows ends.
  double flowsEnd() {
    if (flows_.empty()) return 0;
    // Above kMaxFluid flows every flow keeps its initial share (no speed-up as others end); one flow has nothing to
    // share with.
    constexpr size_t kMaxFluid = 32;
    double end = 0;
    if (flows_.size() > kMaxFluid || flows_.size() == 1) {
      for (const auto& f : flows_) {
        double rate = f.beta;
        for (int j = 0; j < f.nlinks; ++j) rate = std::min(rate, links_[f.links[j]].cap / links_[f.links[j]].users);
        end = std::max(end, f.start + f.remaining / rate);
      }
      return end;
    }
    double now = 0;
    size_t left = flows_.size();
    while (left > 0) {
      for (auto& f : flows_)
        if (!f.started && f.start <= now) {
          f.started = true;
          for (int j = 0; j < f.nlinks; ++j) ++links_[f.links[j]].active;
        }
      double next = std::numeric_limits<double>::infinity();
      for (auto& f : flows_) {
        if (!f.started) {
          next = std::min(next, f.start);
          continue;
        }
        if (f.done) continue;
        f.rate = f.beta;
        for (int j = 0; j < f.nlinks; ++j) {
          const Link& l = links_[f.links[j]];
          f.rate = std::min(f.rate, l.cap / (l.users * l.active / l.mine));
        }
        next = std::min(next, now + f.remaining / f.rate);
      }
      const double dt = next - now;
      now = next;
      for (auto& f : flows_) {
        if (!f.started || f.done) continue;
        f.remaining -= f.rate * dt;
        if (f.remaining <= f.rate * 1e-12 + 1e-9) {
          f.done = true;
          --left;
          for (int j = 0; j < f.nlinks; ++j) --links_[f.links[j]].active;
        }
      }
    }
    return now;
  }

  const std::function<sched::Schedule(int)>& gen_;
  const Topology& t_;
  double elem_;
  const LinkModel& m_;
  const FastOptions& o_;
  RepSet rs_;
  std::vector<Counts> recvs_, nicOut_, nicIn_, upOut_, upIn_;
  std::vector<Summary> summaries_;
  std::vector<double> stepTime_;
  std::vector<Link> links_;
  std::unordered_map<long long, int> linkIndex_;  // (id, type) -> index in links_
  std::vector<Flow> flows_;
  double bytes_[hocclNumLinkClasses] = {};
  Prediction pred_;
};

}  // namespace

Prediction predictFast(const std::function<sched::Schedule(int rank)>& gen, const Topology& topo, size_t elemSize,
                       const LinkModel& model, const FastOptions& options) {
  if (topo.nranks <= 0) throwInvalidArgument("fast cost model: empty topology");
  return FastSim(gen, topo, elemSize, model, options).run();
}

}  // namespace hoccl::topo
