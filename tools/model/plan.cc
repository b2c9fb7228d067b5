// hoccl-model plan: ranks parallel layouts of a transformer by predicted communication time per training step.
//
// AxoNN-style 4D layouts (gx x gy x gz tensor parallel x gd data parallel, gx fastest in rank order, every
// factorisation of N). Per fully connected layer with a k x n weight and m = batch * seq / gd tokens per data
// replica (bf16), our reading of AxoNN's 3D matrix multiply (arXiv 2305.13525), no overlap with compute:
//   forward   all-gather of the weight shard over z (k*n/(gx*gy) elements), all-reduce of the output over x
//             (m*n/(gz*gy));
//   backward  all-reduce of the input gradient over y (m*k/(gz*gx)), reduce-scatter of the weight gradient over z;
//   per step  all-reduce of the weight gradient over the gd data-parallel ranks (k*n/(gx*gy*gz)).
// A transformer layer is four such layers: H x 3H (QKV), H x H (projection), H x 4H and 4H x H (MLP). The
// data-parallel all-reduce covers all --params parameters. Each collective is priced by the cost model
// (the fast path algo::predictFast at every size, the faster of ring and HO-Ring; groups above 1,024 ranks HO-Ring
// only) on the group's own shape,
// with the NIC and spine capacity divided among the groups that share them. Memory per rank: model states only,
// 16 bytes per parameter (bf16 weights and gradients, fp32 Adam) over gx*gy*gz; activations are not counted.
// PaRO strategies (data parallel, groups = hosts): the PaRO mapper's own ranking (src/paro/plan.h) with this
// link model's latencies and bandwidths.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "algo/predict.h"
#include "algo/registry.h"
#include "paro/plan.h"
#include "tools/model/model_tool.h"

namespace hoccl::model_tool {
namespace {

struct Layout4D {
  int gx, gy, gz, gd;
  double seconds = 0, memory = 0;
  double parts[5] = {};  // AG_z, AR_x, AR_y, RS_z, AR_d: seconds per step
};

double parseCount(const std::string& text) {
  return parseWithUnit(text, {{'K', 1e3}, {'M', 1e6}, {'B', 1e9}, {'T', 1e12}}, "--params", "80B, 350M");
}

// Prices one collective on the group of `size` ranks with stride `stride` (in rank order) starting at rank 0, all
// such groups running at once. Cached: many layouts share groups.
class GroupPricer {
 public:
  GroupPricer(const topo::Topology& t, const topo::LinkModel& m) : t_(t), m_(m) {}

  double seconds(sched::Coll coll, int stride, int size, double elems) {
    if (size <= 1 || elems < 1) return 0;
    const size_t count = static_cast<size_t>(elems);
    auto key = std::make_tuple(static_cast<int>(coll), stride, size, count);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    // The group's shape: its members' hosts grouped by switch.
    std::vector<std::vector<int>> counts;
    int lastSwitch = -1, lastHost = -1;
    for (int i = 0; i < size; ++i) {
      int r = i * stride;
      if (t_.switchOf[r] != lastSwitch) counts.emplace_back(), lastSwitch = t_.switchOf[r], lastHost = -1;
      if (t_.hostOf[r] != lastHost) counts.back().push_back(0), lastHost = t_.hostOf[r];
      ++counts.back().back();
    }
    topo::Topology g = topo::fromCounts(counts);
    // Groups sharing a host's NIC and a switch's uplink: ranks there / members of this group there.
    topo::LinkModel m = m_;
    int perHost = 0, perSwitch = 0, membersOnHost = counts[0][0], membersOnSwitch = 0;
    for (int r = 0; r < t_.nranks; ++r) {
      perHost += t_.hostOf[r] == 0;
      perSwitch += t_.switchOf[r] == 0;
    }
    for (int c : counts[0]) membersOnSwitch += c;
    m.nic /= std::max(1, perHost / membersOnHost);
    m.spine /= std::max(1, perSwitch / membersOnSwitch);
    sched::CollArgs args{coll, 0, size, count, 0, 0};
    double best = 0;
    for (const algo::Algorithm* a : algo::candidates(args, g)) {
      const std::string name = a->name;
      if (name == "direct" || (name == "ring" && size > 1024)) continue;
      double s = algo::predictFast(*a, args, g, 2, m).seconds;
      if (best == 0 || s < best) best = s;
    }
    cache_.emplace(key, best);
    return best;
  }

 private:
  const topo::Topology& t_;
  const topo::LinkModel& m_;
  std::map<std::tuple<int, int, int, size_t>, double> cache_;
};

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

}  // namespace

int plan(const PlanOptions& o, const topo::Topology& t, const topo::LinkModel& model) {
  const double params = parseCount(o.params);
  const double H = static_cast<double>(o.hidden), L = static_cast<double>(o.layers);
  const double tokens = static_cast<double>(o.batch) * static_cast<double>(o.seq);
  const double fc[4][2] = {{H, 3 * H}, {H, H}, {H, 4 * H}, {4 * H, H}};
  GroupPricer price(t, model);
  std::vector<Layout4D> layouts;
  const int n = t.nranks;
  for (int gx : divisors(n))
    for (int gy : divisors(n / gx))
      for (int gz : divisors(n / gx / gy)) {
        Layout4D l{gx, gy, gz, n / gx / gy / gz};
        if (o.batch % l.gd) continue;  // whole sequences per data replica
        const double m = tokens / l.gd;
        for (const auto& w : fc) {
          const double k = w[0], nn = w[1];
          // Groups: x = gx consecutive ranks; y stride gx; z stride gx*gy; d stride gx*gy*gz.
          l.parts[0] += L * price.seconds(sched::Coll::AllGather, gx * gy, gz, k * nn / (gx * gy) / gz);
          l.parts[1] += L * price.seconds(sched::Coll::AllReduce, 1, gx, m * nn / (gz * gy));
          l.parts[2] += L * price.seconds(sched::Coll::AllReduce, gx, gy, m * k / (gz * gx));
          l.parts[3] += L * price.seconds(sched::Coll::ReduceScatter, gx * gy, gz, k * nn / (gx * gy) / gz);
        }
        l.parts[4] = price.seconds(sched::Coll::AllReduce, gx * gy * gz, l.gd, params / (gx * gy * gz));
        for (double p : l.parts) l.seconds += p;
        l.memory = 16.0 * params / (gx * gy * gz);
        layouts.push_back(l);
      }
  const double budget = o.memoryGiB * 1073741824.0;
  std::stable_sort(layouts.begin(), layouts.end(), [&](const Layout4D& a, const Layout4D& b) {
    bool fa = budget <= 0 || a.memory <= budget, fb = budget <= 0 || b.memory <= budget;
    if (fa != fb) return fa;
    return a.seconds < b.seconds;
  });

  paro::ModelSize size;
  size.params = size.trainable = static_cast<uint64_t>(params);
  paro::LinkModel links;
  for (int c = 0; c < hocclNumLinkClasses; ++c) links.alpha[c] = model.startup(c);
  links.bw[hocclLinkSelf] = model.beta[hocclLinkSelf];
  links.bw[hocclLinkIntraHost] = model.beta[hocclLinkIntraHost];
  links.bw[hocclLinkIntraSwitch] = model.nic;
  links.bw[hocclLinkInterSwitch] = model.spine;
  auto strategies = paro::rankStrategies(paro::makeLayout(t, paro::GroupLevel::Host), size, o.microSteps, budget,
                                         links);

  const size_t top = static_cast<size_t>(o.top);
  if (o.json) {
    nlohmann::json j{{"ranks", n}, {"hosts", t.nhosts}, {"switches", t.nswitches}, {"model", model.describe()}};
    for (size_t i = 0; i < std::min(top, layouts.size()); ++i) {
      const auto& l = layouts[i];
      j["layouts"].push_back({{"gx", l.gx},
                              {"gy", l.gy},
                              {"gz", l.gz},
                              {"gdata", l.gd},
                              {"comm_seconds", l.seconds},
                              {"memory_bytes", l.memory},
                              {"fits", budget <= 0 || l.memory <= budget},
                              {"ag_z", l.parts[0]},
                              {"ar_x", l.parts[1]},
                              {"ar_y", l.parts[2]},
                              {"rs_z", l.parts[3]},
                              {"ar_data", l.parts[4]}});
    }
    for (size_t i = 0; i < std::min(top, strategies.size()); ++i) {
      const auto& s = strategies[i];
      j["paro"].push_back({{"strategy", s.strategy.name()},
                           {"comm_seconds", s.seconds},
                           {"memory_bytes", s.memory.total},
                           {"fits", s.fits}});
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{} ranks ({} hosts, {} switches), {} parameters, hidden {}, {} layers, seq {}, batch {}\nmodel: {}\n", n,
             t.nhosts, t.nswitches, o.params, o.hidden, o.layers, o.seq, o.batch, model.describe());
  fmt::print("\n4D layouts (gx x gy x gz tensor x gdata data parallel), communication per step, no overlap:\n");
  fmt::print("{:>4} {:>5} {:>5} {:>5} {:>6} {:>11} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "#", "gx", "gy", "gz",
             "gdata", "comm (s)", "mem (GiB)", "AG_z", "AR_x", "AR_y", "RS_z", "AR_data");
  for (size_t i = 0; i < std::min(top, layouts.size()); ++i) {
    const auto& l = layouts[i];
    fmt::print("{:>4} {:>5} {:>5} {:>5} {:>6} {:>11.4f} {:>10.2f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f}{}\n",
               i + 1, l.gx, l.gy, l.gz, l.gd, l.seconds, l.memory / 1073741824.0, l.parts[0], l.parts[1], l.parts[2],
               l.parts[3], l.parts[4], budget > 0 && l.memory > budget ? "  (does not fit)" : "");
  }
  fmt::print("\nPaRO strategies (data parallel, groups = hosts, {} micro-steps; PaRO mapper's ring formulas):\n",
             o.microSteps);
  fmt::print("{:>4} {:>8} {:>11} {:>10}\n", "#", "strategy", "comm (s)", "mem (GiB)");
  for (size_t i = 0; i < std::min(top, strategies.size()); ++i) {
    const auto& s = strategies[i];
    fmt::print("{:>4} {:>8} {:>11.4f} {:>10.2f}{}\n", i + 1, s.strategy.name(), s.seconds,
               s.memory.total / 1073741824.0, s.fits ? "" : "  (does not fit)");
  }
  return 0;
}

}  // namespace hoccl::model_tool
