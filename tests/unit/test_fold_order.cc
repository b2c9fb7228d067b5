// Fold orders (kernels/fold_order.h): that the ring's, HO-Ring's and the direct schedule's folds say exactly how
// their schedules add up every element, and that foldInto adds in the order given, in every type, with the output on
// any input.
//
// The schedules run in the verifier with op(a, b) = sin(a) + sin(b): commutative, as every reduction hoccl runs is
// (so which operand a step passes first cannot matter), but not associative, so an element's value names the order
// its inputs were combined in: the fold computed from the FoldOrder must equal the schedule's output exactly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "algo/ho_ring.h"
#include "algo/registry.h"
#include "algo/ring.h"
#include "kernels/fold_order.h"
#include "sched/verifier.h"

using namespace hoccl;
using sched::Coll;

namespace {

topo::Topology oneHost(int n) {
  std::vector<boot::RankInfo> infos(n);
  for (int r = 0; r < n; ++r) {
    std::snprintf(infos[r].hostId, sizeof(infos[r].hostId), "host0");
    infos[r].rank = r;
  }
  return topo::build(infos);
}

double sinSum(double a, double b) { return std::sin(a) + std::sin(b); }

// The fold of element e of the inputs in `fold`'s order, with sinSum.
double folded(const kernels::FoldOrder& fold, const std::vector<std::vector<double>>& in, size_t e) {
  double value = 0;
  fold.forEach(e, e + 1, [&](size_t, size_t, const std::vector<int>& order) {
    value = in[order[0]][e];
    for (size_t k = 1; k < order.size(); ++k) value = sinSum(value, in[order[k]][e]);
  });
  return value;
}

// Runs `generate` on every rank of one host and compares every output element with the fold; returns the number
// of elements that differ.
size_t mismatches(sched::Schedule (*generate)(const sched::CollArgs&, const topo::Topology&),
                  const kernels::FoldOrder& fold, sched::CollArgs args, bool inPlace, std::mt19937& rng) {
  const topo::Topology topo = oneHost(args.nranks);
  const int n = args.nranks;
  const size_t total = args.coll == Coll::AllReduce ? args.count : args.count * n;
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  std::vector<std::vector<double>> in(n, std::vector<double>(total));
  for (auto& v : in)
    for (double& x : v) x = value(rng);
  args.inPlace = inPlace;
  std::vector<sched::Schedule> schedules;
  for (int r = 0; r < n; ++r) {
    sched::CollArgs a = args;
    a.rank = r;
    schedules.push_back(generate(a, topo));
  }
  const auto out = sched::runCollective(schedules, args, in, inPlace, sinSum);
  size_t bad = 0;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < out[r].size(); ++i) {
      const size_t e = args.coll == Coll::AllReduce ? i : static_cast<size_t>(r) * args.count + i;
      bad += !(out[r][i] == folded(fold, in, e));
    }
  return bad;
}

sched::CollArgs argsOf(Coll coll, int n, size_t count, size_t chunk = 0) {
  sched::CollArgs a;
  a.coll = coll;
  a.nranks = n;
  a.count = count;
  a.chunkCount = chunk;
  return a;
}

}  // namespace

namespace {

// Every all-reduce and reduce-scatter of the registered algorithm `name` on one host of minRanks..7 ranks, at awkward
// counts (`extra` added), each pipelining chunk of `chunks`, in and out of place: the schedule's outputs equal the fold
// its Algorithm::fold names, element by element.
void checkFolds(const char* name, int minRanks, std::vector<size_t> extra, std::vector<size_t> chunks, unsigned seed) {
  const algo::Algorithm& alg = algo::byName(name);
  REQUIRE(alg.fold);
  std::mt19937 rng(seed);
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter})
    for (int n = minRanks; n <= 7; ++n) {
      std::vector<size_t> counts = {0, 1, 2, 7, size_t(n - 1), size_t(n + 1), 1001};
      counts.insert(counts.end(), extra.begin(), extra.end());
      for (size_t count : counts)
        for (size_t chunk : chunks)
          for (bool inPlace : {false, true}) {
            const sched::CollArgs args = argsOf(coll, n, count, chunk);
            const auto fold = alg.fold(args, oneHost(n));
            REQUIRE(fold);
            INFO(name << " " << sched::collName(coll) << " n=" << n << " count=" << count << " chunk=" << chunk
                      << " inPlace=" << inPlace);
            CHECK(mismatches(alg.generate, *fold, args, inPlace, rng) == 0);
          }
    }
  CHECK_FALSE(alg.fold(argsOf(Coll::AllGather, 3, 10), oneHost(3)));
}

}  // namespace

TEST_CASE("the ring's fold is the order its all-reduce and reduce-scatter add in", "[schedules][fold]") {
  checkFolds("ring", 1, {}, {0}, 11);
}

TEST_CASE("the direct schedule's fold is rank order, on every rank", "[schedules][fold]") {
  checkFolds("direct", 1, {}, {0}, 15);
}

TEST_CASE("HO-Ring's fold on one host is the order it adds in, for every chunking", "[schedules][fold]") {
  checkFolds("ho_ring", 2, {40000}, {0, 3, 64, 5000}, 12);
  CHECK_FALSE(algo::hoRingFold(argsOf(Coll::AllReduce, 1, 10), oneHost(1)));  // one rank: nothing to fold
}

TEST_CASE("the check can fail: another order than the schedule's is caught", "[schedules][fold]") {
  // The ring's fold with its orders reversed: a different association on 3 or more ranks.
  std::mt19937 rng(13);
  const sched::CollArgs args = argsOf(Coll::AllReduce, 4, 1001);
  auto fold = *algo::ringFold(args, oneHost(4));
  for (auto& order : fold.orders) std::reverse(order.begin(), order.end());
  CHECK(mismatches(algo::ringSchedule, fold, args, false, rng) > 0);
  // And HO-Ring's chunked parts are not the ring's blocks.
  const sched::CollArgs chunked = argsOf(Coll::AllReduce, 4, 40000, 64);
  CHECK(mismatches(algo::hoRingSchedule, *algo::ringFold(chunked, oneHost(4)), chunked, false, rng) > 0);
}

TEST_CASE("FoldOrder::forEach cuts a range at its segments, empty segments included", "[fold]") {
  kernels::FoldOrder fold;
  fold.orders = kernels::FoldOrder::ringOrders({2, 0, 1});
  CHECK(fold.orders[0] == std::vector<int>{0, 1, 2});
  CHECK(fold.orders[2] == std::vector<int>{2, 0, 1});
  fold.segments = {{0, 0}, {10, 1}, {10, 2}, {25, 0}};
  std::vector<std::tuple<size_t, size_t, int>> seen;
  fold.forEach(5, 30, [&](size_t b, size_t e, const std::vector<int>& order) { seen.emplace_back(b, e, order[0]); });
  const std::vector<std::tuple<size_t, size_t, int>> want = {{5, 10, 0}, {10, 25, 2}, {25, 30, 0}};
  CHECK(seen == want);
  seen.clear();
  fold.forEach(12, 13, [&](size_t b, size_t e, const std::vector<int>& order) { seen.emplace_back(b, e, order[0]); });
  CHECK(seen == std::vector<std::tuple<size_t, size_t, int>>{{12, 13, 2}});
}

TEST_CASE("foldInto adds in the order given, in every type, with the output on any input", "[fold]") {
  std::mt19937 rng(14);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  const kernels::MemoryOps& mem = kernels::hostMemoryOps();
  const size_t n = 1037;
  for (hocclDataType_t dt : {hocclFloat32, hocclFloat64, hocclFloat16, hocclBfloat16, hocclInt32})
    for (int p : {1, 2, 3, 5})
      for (int outOn = -1; outOn < p; ++outOn) {  // -1: a separate output; else the output is input outOn
        const size_t elem = kernels::typeSize(dt);
        std::vector<std::vector<char>> in(p, std::vector<char>(n * elem));
        for (auto& buffer : in)
          for (size_t i = 0; i < n; ++i) {
            const double v = dt == hocclInt32 ? std::round(value(rng) * 100) : value(rng);
            kernels::fromDouble(v, buffer.data() + i * elem, dt);
          }
        std::vector<int> order(p);
        for (int k = 0; k < p; ++k) order[k] = (k * 2 + 1) % p;  // a permutation for p = 1, 2, 3, 5
        // The reference: the same pairwise reductions, one element at a time, into a separate buffer.
        std::vector<char> want(n * elem);
        for (size_t i = 0; i < n; ++i) {
          char* w = want.data() + i * elem;
          if (p == 1) std::memcpy(w, in[order[0]].data() + i * elem, elem);
          else
            mem.reduce(w, in[order[0]].data() + i * elem, in[order[1]].data() + i * elem, 1, dt, kernels::BinOp::Sum);
          for (int k = 2; k < p; ++k) mem.reduce(w, w, in[order[k]].data() + i * elem, 1, dt, kernels::BinOp::Sum);
        }
        std::vector<char> separate(n * elem);
        void* out = outOn < 0 ? separate.data() : in[outOn].data();
        std::vector<const void*> sources;
        for (auto& buffer : in) sources.push_back(buffer.data());
        kernels::foldInto(mem, out, sources, order, n, dt, kernels::BinOp::Sum);
        INFO("type " << kernels::typeName(dt) << " p=" << p << " output on input " << outOn);
        CHECK(std::memcmp(out, want.data(), n * elem) == 0);
      }
}
