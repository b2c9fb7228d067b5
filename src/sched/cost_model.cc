// Cost model: a discrete-event simulation of the schedules of all ranks.
//
// Each rank runs its steps in order; a step ends when all its prims have ended. A message (a send matched in FIFO order
// with the peer's receive) starts when both ranks have entered the steps holding the two prims, plus the alpha and the
// per-step cost of its link class (LinkModel::startup), and then flows at a rate limited by its class's per-flow beta
// and by its share of every shared link it crosses: a host NIC per direction (inter-host flows) and a switch uplink per
// direction (inter-switch flows). Concurrent flows on a link split its capacity equally; rates are recomputed whenever
// a flow starts or ends. Every flow also passes its two ranks' ports (a rank moves at most beta(intra-host) bytes per
// second in and out, whatever the number of flows); an intra-host message of data its sender wrote in its step
// before moves 1 / cacheGain of its bytes at that rate when it fits the rank's cache (LinkModel::streamedBytes,
// sched/fresh_data.h). Local prims (copy, reduce) of a step run for alpha + bytes /
// beta(Self), concurrently with the step's network messages; its intra-host messages start after them, since the
// same core copies both (a message between ranks of one host is copied into and out of shared memory by the two
// ranks' threads: ring all-gather's step 0 copies the rank's own block, then sends it).
//
// A shaped uplink (LinkModel::spineBurst > 0) is a token bucket per direction, as tc tbf shapes one: it holds up to
// spineBurst bytes of tokens, gains them at the spine rate and loses them at the rate its flows move. While it holds
// tokens it does not limit its flows (they run at the intra-switch rate and their other links' shares: beyond the
// shaper the path is the switch's); when it runs dry it caps them at spine / flows until a flow starts or ends with
// tokens back in the bucket. The prediction is for a call among back-to-back calls (what a benchmark or validate
// times): the buckets start where the previous call left them, found by simulating the call from full buckets and
// again from the levels it ended with until they repeat within 1% of the burst (at most 8 runs).
#include "sched/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>

#include "base/error.h"
#include "sched/fresh_data.h"

namespace hoccl::topo {
namespace {

using sched::PrimKind;

struct Message {
  int src = 0, dst = 0;
  double bytes = 0;
  double streamed = -1;  // the bytes its rate applies to (LinkModel::streamedBytes), set from the send side
  hocclLinkClass_t cls = hocclLinkSelf;
  double sendEnter = -1, recvEnter = -1;  // when each side entered the step holding its prim
};

struct Flow {
  int msg;
  double remaining;
  double rate = 0;
  std::vector<int> links;
};

class Simulator {
 public:
  /// `tokens`: each uplink direction's bucket at the start (2 per switch: out, in); empty when unshaped.
  Simulator(const std::vector<sched::Schedule>& s, const Topology& t, size_t elemSize, const LinkModel& m,
            std::vector<double> tokens)
      : s_(s), t_(t), elem_(static_cast<double>(elemSize)), m_(m), tokens_(std::move(tokens)) {}

  /// The buckets' levels when the call ended.
  const std::vector<double>& tokens() const { return tokens_; }

  Prediction run() {
    match();
    int n = t_.nranks;
    cur_.assign(n, 0);
    users_.assign(2 * (t_.nhosts + t_.nswitches + n), 0);
    pending_.assign(n, 0);
    usage_.assign(tokens_.size(), 0);
    burst_.assign(tokens_.size(), false);
    for (size_t b = 0; b < tokens_.size(); ++b) burst_[b] = tokens_[b] > 0;
    for (int r = 0; r < n; ++r) enter(r, 0.0);
    while (true) {
      double next = std::numeric_limits<double>::infinity();
      if (!starts_.empty()) next = starts_.top().first;
      if (!locals_.empty()) next = std::min(next, locals_.top().first);
      int finishing = -1, emptying = -1;
      for (size_t f = 0; f < flows_.size(); ++f) {
        double end = now_ + flows_[f].remaining / flows_[f].rate;
        if (end < next) {
          next = end;
          finishing = static_cast<int>(f);
        }
      }
      // A bucket that its flows drain faster than it refills runs dry.
      for (size_t b = 0; b < tokens_.size(); ++b)
        if (burst_[b] && usage_[b] > m_.spine) {
          const double dry = now_ + tokens_[b] / (usage_[b] - m_.spine);
          if (dry < next) next = dry, finishing = -1, emptying = static_cast<int>(b);
        }
      if (next == std::numeric_limits<double>::infinity()) break;
      advance(next);
      if (emptying >= 0) {
        tokens_[emptying] = 0;
        burst_[emptying] = false;
        rates();
      } else if (finishing >= 0) {
        finishFlow(finishing);
      } else if (!starts_.empty() && starts_.top().first <= now_) {
        int msg = starts_.top().second;
        starts_.pop();
        startFlow(msg);
      } else {
        int r = locals_.top().second;
        locals_.pop();
        done(r);
      }
    }
    for (int r = 0; r < n; ++r)
      if (cur_[r] < s_[r].steps.size())
        throwInvalidArgument(fmt::format("cost model: the schedules deadlock: rank {} is stuck in step {} of {}", r,
                                         cur_[r], s_[r].steps.size()));
    pred_.seconds = now_;
    return pred_;
  }

 private:
  // Pairs every send with the receive at the same FIFO position between the same two ranks.
  void match() {
    int n = t_.nranks;
    std::map<std::pair<int, int>, std::vector<int>> sends, recvs;
    msgOf_.resize(n);
    for (int r = 0; r < n; ++r) {
      msgOf_[r].resize(s_[r].steps.size());
      pred_.maxSteps = std::max(pred_.maxSteps, s_[r].steps.size());
      for (size_t k = 0; k < s_[r].steps.size(); ++k)
        for (const auto& p : s_[r].steps[k].prims) {
          // Local work, and callbacks (the caller's compute, which the model does not know: priced at zero).
          if (p.kind == PrimKind::Copy || p.kind == PrimKind::Reduce || isCallback(p)) continue;
          if (p.peer < 0 || p.peer >= n || p.peer == r)
            throwInvalidArgument(fmt::format("cost model: rank {} step {} names peer {}", r, k, p.peer));
          bool isSend = p.kind == PrimKind::Send;
          auto key = isSend ? std::make_pair(r, p.peer) : std::make_pair(p.peer, r);
          auto& mine = isSend ? sends[key] : recvs[key];
          auto& other = isSend ? recvs[key] : sends[key];
          size_t pos = mine.size();
          int id;
          if (pos < other.size()) {
            id = other[pos];
            if (msgs_[id].bytes != static_cast<double>(p.count) * elem_)
              throwInvalidArgument(
                  fmt::format("cost model: message {} from rank {} to rank {} has different counts "
                              "on the two sides",
                              pos, key.first, key.second));
          } else {
            id = static_cast<int>(msgs_.size());
            Message m;
            m.src = key.first;
            m.dst = key.second;
            m.bytes = static_cast<double>(p.count) * elem_;
            m.cls = t_.linkClass(m.src, m.dst);
            msgs_.push_back(m);
          }
          if (isSend)
            msgs_[id].streamed = m_.streamedBytes(msgs_[id].bytes, msgs_[id].cls,
                                                  sched::sendsFreshData(k ? &s_[r].steps[k - 1] : nullptr, p));
          mine.push_back(id);
          msgOf_[r][k].push_back(id);
        }
    }
    for (const auto& [key, list] : sends)
      if (recvs[key].size() != list.size())
        throwInvalidArgument(fmt::format("cost model: rank {} sends {} messages to rank {}, which receives {}",
                                         key.first, list.size(), key.second, recvs[key].size()));
    for (const auto& m : msgs_) pred_.bytes[m.cls] += m.bytes;
    pred_.messages = msgs_.size();
  }

  void enter(int r, double at) {
    while (cur_[r] < s_[r].steps.size()) {
      const auto& step = s_[r].steps[cur_[r]];
      double local = 0;
      bool hasLocal = false;
      for (const auto& p : step.prims)
        if (p.kind == PrimKind::Copy || p.kind == PrimKind::Reduce) {
          bool same = p.kind == PrimKind::Copy && p.src == p.dst && p.srcOff == p.dstOff;
          if (!same) {
            local = std::max(local, m_.startup(hocclLinkSelf) + static_cast<double>(p.count) * elem_ / m_.beta[0]);
            hasLocal = true;
          }
        }
      pending_[r] = static_cast<int>(msgOf_[r][cur_[r]].size()) + (hasLocal ? 1 : 0);
      if (hasLocal) locals_.emplace(at + local, r);
      for (int id : msgOf_[r][cur_[r]]) {
        Message& m = msgs_[id];
        (m.src == r ? m.sendEnter : m.recvEnter) = m.cls == hocclLinkIntraHost ? at + local : at;
        if (m.sendEnter >= 0 && m.recvEnter >= 0)
          starts_.emplace(std::max(m.sendEnter, m.recvEnter) + m_.startup(m.cls), id);
      }
      if (pending_[r] > 0) return;
      ++cur_[r];
    }
  }

  void done(int r) {
    if (--pending_[r] == 0) {
      ++cur_[r];
      enter(r, now_);
    }
  }

  void startFlow(int id) {
    const Message& m = msgs_[id];
    Flow f{id, m.streamed, 0, {}};
    int hs = t_.hostOf[m.src], hd = t_.hostOf[m.dst];
    // Link ids: NIC out/in per host, then uplink out/in per switch, then each rank's port out/in.
    int sw = t_.nhosts, port = t_.nhosts + t_.nswitches;
    f.links = {2 * port + 2 * m.src, 2 * port + 2 * m.dst + 1};
    if (m.cls >= hocclLinkIntraSwitch) f.links.insert(f.links.end(), {2 * hs, 2 * hd + 1});
    if (m.cls == hocclLinkInterSwitch) {
      f.links.push_back(2 * sw + 2 * t_.switchOf[m.src]);
      f.links.push_back(2 * sw + 2 * t_.switchOf[m.dst] + 1);
    }
    if (f.remaining <= 0) {
      finishMessage(id);
      return;
    }
    for (int l : f.links) ++users_[l];
    flows_.push_back(f);
    rates();
  }

  void finishFlow(int f) {
    int id = flows_[f].msg;
    for (int l : flows_[f].links) --users_[l];
    flows_[f] = flows_.back();
    flows_.pop_back();
    rates();
    finishMessage(id);
  }

  void finishMessage(int id) {
    done(msgs_[id].src);
    done(msgs_[id].dst);
  }

  // Recomputes every active flow's rate from the flow counts per link (users_, kept up to date by start/finish), and
  // each shaped uplink's usage. A bucket with tokens stops limiting again here (when a flow starts or ends).
  void rates() {
    int sw = t_.nhosts, port = t_.nhosts + t_.nswitches;
    for (size_t b = 0; b < tokens_.size(); ++b) {
      if (tokens_[b] > 0) burst_[b] = true;
      usage_[b] = 0;
    }
    for (auto& f : flows_) {
      const hocclLinkClass_t cls = msgs_[f.msg].cls;
      double rate = m_.beta[!tokens_.empty() && cls == hocclLinkInterSwitch ? hocclLinkIntraSwitch : cls];
      for (int l : f.links) {
        if (l >= 2 * sw && l < 2 * port && !tokens_.empty() && burst_[l - 2 * sw]) continue;
        double cap = l < 2 * sw ? m_.nic : l < 2 * port ? m_.spine : m_.beta[hocclLinkIntraHost];
        rate = std::min(rate, cap / users_[l]);
      }
      f.rate = rate;
      if (!tokens_.empty())
        for (int l : f.links)
          if (l >= 2 * sw && l < 2 * port) usage_[l - 2 * sw] += rate;
    }
  }

  void advance(double to) {
    double dt = to - now_;
    for (auto& f : flows_) f.remaining = std::max(0.0, f.remaining - f.rate * dt);
    for (size_t b = 0; b < tokens_.size(); ++b)
      tokens_[b] = std::clamp(tokens_[b] + (m_.spine - usage_[b]) * dt, 0.0, m_.spineBurst);
    now_ = to;
  }

  const std::vector<sched::Schedule>& s_;
  const Topology& t_;
  double elem_;
  const LinkModel& m_;
  std::vector<Message> msgs_;
  std::vector<std::vector<std::vector<int>>> msgOf_;  // rank -> step -> message ids
  std::vector<size_t> cur_;
  std::vector<int> pending_;
  std::vector<Flow> flows_;
  std::vector<int> users_;  // link id -> active flows on it
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> starts_, locals_;
  double now_ = 0;
  Prediction pred_;
  std::vector<double> tokens_;  // shaped uplinks (2 * switch + 0 out, + 1 in): tokens in the bucket (bytes)
  std::vector<double> usage_;   // shaped uplink -> bytes per second its flows move now
  std::vector<char> burst_;     // shaped uplink -> not limiting its flows (it had tokens at the last rates())
};

}  // namespace

Prediction predict(const std::vector<sched::Schedule>& schedules, const Topology& topo, size_t elemSize,
                   const LinkModel& model) {
  if (static_cast<int>(schedules.size()) != topo.nranks)
    throwInvalidArgument(
        fmt::format("cost model: {} schedules for a topology of {} ranks", schedules.size(), topo.nranks));
  if (model.spineBurst <= 0 || topo.nswitches < 2) return Simulator(schedules, topo, elemSize, model, {}).run();
  // Back-to-back calls: start from full buckets, then from the levels the previous run ended with, until they repeat.
  std::vector<double> levels(2 * static_cast<size_t>(topo.nswitches), model.spineBurst);
  Prediction p;
  for (int run = 0; run < 8; ++run) {
    Simulator sim(schedules, topo, elemSize, model, levels);
    p = sim.run();
    double moved = 0;
    for (size_t b = 0; b < levels.size(); ++b) moved = std::max(moved, std::abs(sim.tokens()[b] - levels[b]));
    levels = sim.tokens();
    if (moved <= 0.01 * model.spineBurst) break;
  }
  return p;
}

}  // namespace hoccl::topo
