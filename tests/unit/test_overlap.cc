// The schedules of the overlapped all-gather and reduce-scatter and of the ring shift (src/algo/overlap.h), run
// through the verifier (every rank in memory, rendezvous semantics, double data) with callbacks that record what
// they see (all-gather) or write the caller's data (reduce-scatter), and compared with the reference collective.
// Shapes: one host of 1..5 ranks, 2x2x2, 2 hosts x 3 and 3 hosts x 2 ranks (where the two-level schedules of
// src/algo/overlap_two_level.h apply), one rank per host, an uneven cluster and ranks not numbered in topology order;
// counts 0, 1, 7 and 13; separate and in-place buffers; flat and two-level.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "algo/overlap.h"
#include "algo/overlap_two_level.h"
#include "sched/verifier.h"
#include "topology/topology.h"

using namespace hoccl;
using sched::Coll;

namespace {

struct Shape {
  std::string name;
  topo::Topology topo;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int n = 1; n <= 5; ++n) out.push_back({fmt::format("1 host x {}", n), topo::fromShape(1, 1, n)});
  out.push_back({"2x2x2", topo::fromShape(2, 2, 2)});
  out.push_back({"2 hosts x 3", topo::fromShape(1, 2, 3)});
  out.push_back({"3 hosts x 2", topo::fromShape(1, 3, 2)});
  out.push_back({"4 hosts x 1", topo::fromShape(1, 4, 1)});
  out.push_back({"uneven {3,1},{2}", topo::fromCounts({{3, 1}, {2}})});
  std::vector<boot::RankInfo> info(6);  // ranks dealt round-robin over 3 hosts of 2 switches
  for (int r = 0; r < 6; ++r) {
    info[r].rank = r;
    std::snprintf(info[r].hostId, sizeof(info[r].hostId), "host%d", r % 3);
    std::snprintf(info[r].switchId, sizeof(info[r].switchId), "sw%d", (r % 3) / 2);
  }
  out.push_back({"round-robin 3 hosts", topo::build(info)});
  return out;
}

std::vector<std::vector<double>> randomInputs(int n, size_t each, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<std::vector<double>> in(n, std::vector<double>(each));
  for (auto& v : in)
    for (auto& x : v) x = dist(rng);
  return in;
}

bool same(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= 1e-9 * (1 + std::fabs(b[i])))) return false;
  return true;
}

// True when every callback prim but the last of a schedule shares its step with a transfer (it runs while data is
// in flight), and no transfer comes after the last callback's step.
bool callbacksOverlap(const sched::Schedule& s) {
  std::vector<std::pair<size_t, bool>> cbSteps;  // step, has transfer
  size_t lastTransfer = 0;
  bool anyTransfer = false;
  for (size_t k = 0; k < s.steps.size(); ++k) {
    bool transfer = false, cb = false;
    for (const auto& p : s.steps[k].prims) {
      transfer |= p.kind == sched::PrimKind::Send || p.kind == sched::PrimKind::Recv;
      cb |= sched::isCallback(p);
    }
    if (cb) cbSteps.push_back({k, transfer});
    if (transfer) lastTransfer = k, anyTransfer = true;
  }
  if (cbSteps.empty()) return false;
  if (anyTransfer && lastTransfer > cbSteps.back().first) return false;
  return true;
}

}  // namespace

TEST_CASE("overlapped all-gather: own block first, ring order, every block once, output as all-gather", "[overlap]") {
  uint32_t seed = 1;
  for (const Shape& shape : shapes()) {
    const topo::Topology& t = shape.topo;
    const int n = t.nranks;
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(13)})
      for (bool inPlace : {false, true})
        for (bool twoLevel : {false, true}) {
          INFO(shape.name << " count=" << count << (inPlace ? " in-place" : "") << (twoLevel ? " two-level" : ""));
          sched::CollArgs args{Coll::AllGather, 0, n, count, 0, 0};
          std::vector<sched::Schedule> s;
          for (int r = 0; r < n; ++r) {
            args.rank = r;
            s.push_back(algo::overlapAllGatherSchedule(args, t, twoLevel));
            // Every callback but the last runs beside a transfer: n notifies, n-1 of them in steps with a receive.
            int withTransfer = 0, notifies = 0;
            for (const auto& st : s.back().steps) {
              int cb = 0;
              bool tr = false;
              for (const auto& p : st.prims) {
                cb += p.kind == sched::PrimKind::Notify;
                tr |= p.kind == sched::PrimKind::Recv;
              }
              notifies += cb;
              withTransfer += tr ? cb : 0;
            }
            CHECK(notifies == n);
            CHECK(withTransfer == (count ? n - 1 : 0));
          }
          auto in = randomInputs(n, count, seed++);
          std::vector<std::vector<std::pair<int, std::vector<double>>>> seen(n);
          sched::VerifyCallbacks cb;
          cb.notify = [&](int r, int tag, const double* data, size_t c) {
            seen[r].push_back({tag, std::vector<double>(data, data + c)});
          };
          auto op = [](double a, double b) { return a + b; };
          args.rank = 0;
          auto got = sched::runCollective(s, args, in, inPlace, op, cb);
          auto want = sched::referenceCollective(args, in, op);
          for (int r = 0; r < n; ++r) {
            INFO("rank " << r);
            CHECK(same(got[r], want[r]));
            auto order = algo::overlapBlockOrder(t, r, false, twoLevel);
            REQUIRE(seen[r].size() == static_cast<size_t>(n));
            CHECK(seen[r][0].first == r);
            for (int i = 0; i < n; ++i) {
              CHECK(seen[r][i].first == order[i]);
              CHECK(same(seen[r][i].second, in[seen[r][i].first]));
            }
          }
        }
  }
}

TEST_CASE("overlapped reduce-scatter: produce order ends with the own block, nothing exposed after it, sums right",
          "[overlap]") {
  uint32_t seed = 100;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Shape& shape : shapes()) {
    const topo::Topology& t = shape.topo;
    const int n = t.nranks;
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(13)})
      for (bool inPlace : {false, true})
        for (bool twoLevel : {false, true}) {
          INFO(shape.name << " count=" << count << (inPlace ? " in-place" : "") << (twoLevel ? " two-level" : ""));
          sched::CollArgs args{Coll::ReduceScatter, 0, n, count, 0, 0};
          std::vector<sched::Schedule> s;
          for (int r = 0; r < n; ++r) {
            args.rank = r;
            s.push_back(algo::overlapReduceScatterSchedule(args, t, twoLevel));
            CHECK(callbacksOverlap(s.back()));
          }
          // The caller's data: rank r's partial for destination d is data[r][d*count ..]. The input buffers start as
          // NaN: a block read before it is produced poisons the result.
          auto data = randomInputs(n, count * n, seed++);
          std::vector<std::vector<double>> blank(n, std::vector<double>(count * n, nan));
          std::vector<std::vector<int>> order(n);
          sched::VerifyCallbacks cb;
          cb.produce = [&](int r, int tag, double* out, size_t c) {
            order[r].push_back(tag);
            REQUIRE(c == count);
            for (size_t e = 0; e < c; ++e) out[e] = data[r][tag * count + e];
          };
          auto op = [](double a, double b) { return a + b; };
          args.rank = 0;
          auto got = sched::runCollective(s, args, blank, inPlace, op, cb);
          auto want = sched::referenceCollective(args, data, op);
          for (int r = 0; r < n; ++r) {
            INFO("rank " << r);
            CHECK(same(got[r], want[r]));
            CHECK(order[r] == algo::overlapBlockOrder(t, r, true, twoLevel));
            CHECK(order[r].back() == r);
          }
        }
  }
}

namespace {

// Per step of s: whether it has an inter-host transfer, an intra-host transfer, a callback.
struct StepKinds {
  bool inter = false, intra = false, callback = false;
};
std::vector<StepKinds> stepKinds(const sched::Schedule& s, const topo::Topology& t, int rank) {
  std::vector<StepKinds> out;
  for (const auto& st : s.steps) {
    StepKinds k;
    for (const auto& p : st.prims) {
      k.callback |= sched::isCallback(p);
      if (p.kind != sched::PrimKind::Send && p.kind != sched::PrimKind::Recv) continue;
      (t.hostOf[p.peer] == t.hostOf[rank] ? k.intra : k.inter) = true;
    }
    out.push_back(k);
  }
  return out;
}

}  // namespace

TEST_CASE("two-level overlap schedules: where they apply, inter-host transfers first and beside intra-host work",
          "[overlap]") {
  CHECK(algo::twoLevelApplies(topo::fromShape(2, 2, 2)));
  CHECK(algo::twoLevelApplies(topo::fromShape(1, 3, 2)));
  CHECK_FALSE(algo::twoLevelApplies(topo::fromShape(1, 1, 4)));         // one host
  CHECK_FALSE(algo::twoLevelApplies(topo::fromShape(1, 4, 1)));         // one rank per host
  CHECK_FALSE(algo::twoLevelApplies(topo::fromCounts({{3, 1}, {2}})));  // uneven hosts
  for (const topo::Topology& t : {topo::fromShape(2, 2, 2), topo::fromShape(1, 2, 3), topo::fromShape(1, 3, 2)}) {
    const int n = t.nranks;
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r << " of " << n);
      sched::CollArgs ag{Coll::AllGather, r, n, 13, 0, 0}, rs{Coll::ReduceScatter, r, n, 13, 0, 0};
      const sched::Schedule a = algo::overlapAllGatherSchedule(ag, t), b = algo::overlapReduceScatterSchedule(rs, t);
      CHECK(a.algorithm == "overlap_two_level");
      CHECK(b.algorithm == "overlap_two_level");
      CHECK(algo::overlapAllGatherSchedule(ag, t, false).algorithm == "overlap_ring");
      // All-gather: the first transfer step starts an inter-host transfer, and posts it before the intra-host one.
      const auto ka = stepKinds(a, t, r);
      size_t first = 0;
      while (first < ka.size() && !ka[first].inter && !ka[first].intra) ++first;
      REQUIRE(first < ka.size());
      CHECK(ka[first].inter);
      CHECK(t.hostOf[a.steps[first].prims[0].peer] != t.hostOf[r]);
      // Every inter-host transfer runs beside intra-host work (a transfer or a callback).
      for (const auto& k : ka)
        if (k.inter) CHECK((k.intra || k.callback));
      const auto kb = stepKinds(b, t, r);
      size_t lastCallback = 0;
      for (size_t i = 0; i < kb.size(); ++i) {
        if (kb[i].inter) CHECK((kb[i].intra || kb[i].callback));
        if (kb[i].callback) lastCallback = i;
      }
      for (size_t i = lastCallback + 1; i < kb.size(); ++i) CHECK_FALSE(kb[i].inter);
    }
  }
}

TEST_CASE("ring shift: rank r receives rank r-k's buffer for every k, in place or not", "[overlap]") {
  uint32_t seed = 200;
  for (int n = 1; n <= 5; ++n) {
    topo::Topology t = topo::fromShape(1, 1, n);
    for (long long k : {0LL, 1LL, -1LL, 2LL, 3LL, static_cast<long long>(n), static_cast<long long>(n) + 1, -7LL,
                        1000000007LL, -1000000007LL})
      for (size_t count : {size_t(0), size_t(1), size_t(9)})
        for (bool inPlace : {false, true}) {
          INFO("n=" << n << " k=" << k << " count=" << count << (inPlace ? " in-place" : ""));
          sched::CollArgs args{Coll::AllReduce, 0, n, count, 0, 0};
          args.inPlace = inPlace;
          std::vector<sched::Schedule> s;
          for (int r = 0; r < n; ++r) {
            args.rank = r;
            s.push_back(algo::ringShiftSchedule(args, k));
            CHECK(s.back().steps.size() <= 2);
          }
          auto in = randomInputs(n, count, seed++);
          args.rank = 0;
          auto got = sched::runCollective(s, args, in, inPlace, [](double a, double b) { return a + b; });
          const int sh = static_cast<int>(((k % n) + n) % n);
          for (int r = 0; r < n; ++r) CHECK(same(got[r], in[(r - sh + n) % n]));
        }
  }
}

TEST_CASE("the verifier catches a callback that races with a transfer of its step", "[overlap]") {
  // Rank 0 notifies the block that its own receive of the same step is writing.
  sched::Schedule a, b;
  a.steps.push_back(sched::Step{{sched::recv(1, sched::kOutput, 0, 4), sched::notify(1, sched::kOutput, 0, 4)}});
  b.steps.push_back(sched::Step{{sched::send(0, sched::kInput, 0, 4)}});
  sched::CollArgs args{Coll::AllReduce, 0, 2, 4, 0, 0};
  std::vector<std::vector<double>> in(2, std::vector<double>(4, 1.0));
  CHECK_THROWS_WITH(sched::runCollective({a, b}, args, in, false, [](double x, double y) { return x + y; }),
                    Catch::Contains("race"));
  // A produce into a block that a send of the same step reads.
  sched::Schedule c, d;
  c.steps.push_back(sched::Step{{sched::send(1, sched::kInput, 0, 4), sched::produce(1, sched::kInput, 0, 4)}});
  d.steps.push_back(sched::Step{{sched::recv(0, sched::kOutput, 0, 4)}});
  CHECK_THROWS_WITH(sched::runCollective({c, d}, args, in, false, [](double x, double y) { return x + y; }),
                    Catch::Contains("race"));
}
