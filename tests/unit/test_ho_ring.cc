// HO-Ring schedules run through the verifier (all ranks in memory, rendezvous semantics, double data) and compared
// with the reference collective, for regular shapes 1..4 switches x 1..4 hosts x 1..4 ranks, uneven shapes, ranks
// not numbered in topology order, odd and zero counts, small chunks, in-place and separate buffers.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <set>
#include <tuple>

#include "algo/ho_ring.h"
#include "algo/ring.h"
#include "sched/verifier.h"
#include "topology/topology.h"

using namespace hoccl;
using sched::Coll;

namespace {

std::vector<sched::Schedule> allSchedules(sched::CollArgs args, const topo::Topology& t) {
  std::vector<sched::Schedule> s;
  for (int r = 0; r < args.nranks; ++r) {
    args.rank = r;
    s.push_back(algo::hoRingSchedule(args, t));
  }
  return s;
}

// Runs HO-Ring for coll on t and compares with the reference; returns a description of the first failure or "".
std::string check(const topo::Topology& t, Coll coll, size_t count, bool inPlace, size_t chunk, uint32_t seed) {
  sched::CollArgs args{coll, 0, t.nranks, count, 0, chunk};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<std::vector<double>> in(t.nranks);
  for (int r = 0; r < t.nranks; ++r) {
    args.rank = r;
    in[r].resize(sched::bufferCounts(args).input);
    for (auto& x : in[r]) x = dist(rng);
  }
  args.rank = 0;
  auto op = [](double a, double b) { return a + b; };
  std::vector<std::vector<double>> got;
  try {
    got = sched::runCollective(allSchedules(args, t), args, in, inPlace, op);
  } catch (const std::exception& e) {
    return e.what();
  }
  auto want = sched::referenceCollective(args, in, op);
  for (int r = 0; r < t.nranks; ++r) {
    if (got[r].size() != want[r].size()) return "rank " + std::to_string(r) + ": wrong output size";
    for (size_t i = 0; i < want[r].size(); ++i)
      if (!(std::fabs(got[r][i] - want[r][i]) <= 1e-9 * (1 + std::fabs(want[r][i]))))
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " + std::to_string(got[r][i]) +
               " want " + std::to_string(want[r][i]);
  }
  return "";
}

std::string describe(Coll coll, size_t count, bool inPlace, size_t chunk) {
  return std::string(sched::collName(coll)) + " count=" + std::to_string(count) + (inPlace ? " in-place" : "") +
         " chunk=" + std::to_string(chunk);
}

void checkAll(const topo::Topology& t, const std::string& shape) {
  uint32_t seed = 1;
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather})
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(3 * t.nranks + 1)})
      for (bool inPlace : {false, true})
        for (size_t chunk : {size_t(0), size_t(t.nranks <= 16 ? 5 : 61)}) {
          std::string err = check(t, coll, count, inPlace, chunk, seed++);
          INFO(shape << " " << describe(coll, count, inPlace, chunk));
          REQUIRE(err == "");
        }
}

// Elements sent over each link class by all ranks together.
std::vector<size_t> bytesByClass(const std::vector<sched::Schedule>& s, const topo::Topology& t) {
  std::vector<size_t> out(hocclNumLinkClasses, 0);
  for (int r = 0; r < t.nranks; ++r)
    for (const auto& step : s[r].steps)
      for (const auto& p : step.prims)
        if (p.kind == sched::PrimKind::Send) out[t.linkClass(r, p.peer)] += p.count;
  return out;
}

}  // namespace

TEST_CASE("HO-Ring is correct on every regular shape up to 4x4x4", "[ho_ring]") {
  for (int s = 1; s <= 4; ++s)
    for (int h = 1; h <= 4; ++h)
      for (int g = 1; g <= 4; ++g) checkAll(topo::fromShape(s, h, g), fmt::format("{}x{}x{}", s, h, g));
}

TEST_CASE("HO-Ring is correct on uneven shapes", "[ho_ring]") {
  std::vector<std::vector<std::vector<int>>> shapes = {
      {{3, 1}, {2}},           // uneven hosts and switches: flat
      {{2, 2}, {2, 2, 2}},     // even hosts, uneven switches: host level + all hosts
      {{1, 3}, {2, 2}},        // uneven hosts, equal ranks per switch: switch level + spine
      {{1}, {4}},              // a lone host
      {{5}, {1, 1, 1, 1, 1}},  // a big host against small ones
      {{2, 2, 2}},             // one switch
      {{3}, {3}, {3}},         // one host per switch
  };
  for (const auto& shape : shapes) {
    topo::Topology t = topo::fromCounts(shape);
    checkAll(t, fmt::format("uneven {}", topo::hierarchy(t).note));
  }
  std::mt19937 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::vector<int>> shape(1 + rng() % 3);
    for (auto& sw : shape) {
      sw.resize(1 + rng() % 3);
      for (auto& g : sw) g = 1 + static_cast<int>(rng() % 3);
    }
    checkAll(topo::fromCounts(shape), fmt::format("random trial {}", trial));
  }
}

TEST_CASE("HO-Ring is correct when ranks are not numbered in topology order", "[ho_ring]") {
  // 2 switches x 2 hosts x 2 ranks, ranks dealt round-robin over the hosts.
  std::vector<boot::RankInfo> info(8);
  for (int r = 0; r < 8; ++r) {
    int host = r % 4;
    info[r].rank = r;
    std::snprintf(info[r].hostId, sizeof(info[r].hostId), "host%d", host);
    std::snprintf(info[r].switchId, sizeof(info[r].switchId), "sw%d", host % 2);
  }
  topo::Topology t = topo::build(info);
  REQUIRE(topo::hierarchy(t).sizes == std::vector<int>{2, 2, 2});
  checkAll(t, "round-robin 2x2x2");
}

TEST_CASE("HO-Ring sends 2(S-1)/S of the data per switch over the spine, less than the flat ring", "[ho_ring]") {
  for (auto [s, h, g] : {std::tuple{2, 2, 2}, std::tuple{4, 2, 2}, std::tuple{2, 4, 1}, std::tuple{3, 2, 4}}) {
    topo::Topology t = topo::fromShape(s, h, g);
    const size_t count = 4096 * static_cast<size_t>(t.nranks);
    sched::CollArgs args{Coll::AllReduce, 0, t.nranks, count, 0, 0};
    std::vector<sched::Schedule> ring;
    for (int r = 0; r < t.nranks; ++r) {
      args.rank = r;
      ring.push_back(algo::ringSchedule(args, t));
    }
    auto ho = bytesByClass(allSchedules(args, t), t);
    auto flat = bytesByClass(ring, t);
    INFO(s << "x" << h << "x" << g);
    CHECK(ho[hocclLinkInterSwitch] == 2 * static_cast<size_t>(s - 1) * count);
    CHECK(ho[hocclLinkInterSwitch] < flat[hocclLinkInterSwitch]);
    // Reduce-scatter: each switch imports (S-1)/S of the data once.
    sched::CollArgs rs{Coll::ReduceScatter, 0, t.nranks, 4096, 0, 0};
    auto horsBytes = bytesByClass(allSchedules(rs, t), t);
    CHECK(horsBytes[hocclLinkInterSwitch] == static_cast<size_t>(s - 1) * 4096 * t.nranks);
  }
}

TEST_CASE("HO-Ring pipelines chunks across levels", "[ho_ring]") {
  topo::Topology t = topo::fromShape(2, 2, 2);
  sched::CollArgs args{Coll::AllReduce, 3, 8, 1 << 20, 0, 0};
  size_t k = algo::hoRingDefaultChunks(1 << 20, 8);
  CHECK(k > 1);
  auto s = algo::hoRingSchedule(args, t);
  // 6 ring slots per chunk (1 + 1 + 2 + 1 + 1), chunk k starts one step after chunk k-1.
  CHECK(s.steps.size() == k + 5);
  // In the middle of the pipeline a step mixes intra-host, intra-switch and inter-switch traffic.
  std::set<int> classes;
  for (const auto& p : s.steps[k / 2 + 3].prims)
    if (p.peer >= 0) classes.insert(t.linkClass(3, p.peer));
  CHECK(classes.size() == 3);
  CHECK(s.algorithm == "ho_ring");
}

TEST_CASE("HO-Ring rejects what it cannot run", "[ho_ring]") {
  topo::Topology t = topo::fromShape(2, 2, 2);
  sched::CollArgs bcast{Coll::Broadcast, 0, 8, 10, 0, 0};
  CHECK_FALSE(algo::hoRingApplicable(bcast, t));
  CHECK_THROWS(algo::hoRingSchedule(bcast, t));
  sched::CollArgs wrongSize{Coll::AllReduce, 0, 4, 10, 0, 0};
  CHECK_FALSE(algo::hoRingApplicable(wrongSize, t));
}
