// Every flat algorithm through the verifier: every collective x ranks 1..16 x counts {0,1,2,7,n-1,n+1,1000003} x
// in-place and out-of-place x every root, against the direct reference, with random data.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "algo/direct.h"
#include "algo/registry.h"
#include "algo/ring.h"
#include "sched/verifier.h"

using namespace hoccl;
using sched::Coll;

namespace {

topo::Topology flatTopology(int n, int ranksPerHost = 1 << 20) {
  std::vector<boot::RankInfo> infos(n);
  for (int r = 0; r < n; ++r) {
    std::snprintf(infos[r].hostId, sizeof(infos[r].hostId), "host%d", r / ranksPerHost);
    infos[r].rank = r;
  }
  return topo::build(infos);
}

double sum(double a, double b) { return a + b; }

std::vector<std::vector<double>> randomInputs(const sched::CollArgs& args, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-1000, 1000);
  std::vector<std::vector<double>> in(args.nranks);
  for (int r = 0; r < args.nranks; ++r) {
    sched::CollArgs a = args;
    a.rank = r;
    in[r].resize(sched::bufferCounts(a).input);
    for (double& x : in[r]) x = d(rng);
  }
  return in;
}

// Runs one configuration and compares every rank's output with the reference.
void check(Coll coll, int n, size_t count, int root, bool inPlace, const topo::Topology& topo, std::mt19937& rng,
           size_t chunk = 0) {
  sched::CollArgs args;
  args.coll = coll;
  args.nranks = n;
  args.count = count;
  args.root = root;
  args.inPlace = inPlace;
  args.chunkCount = chunk;
  auto cands = algo::candidates(args, topo);
  REQUIRE(!cands.empty());
  auto inputs = randomInputs(args, rng);
  auto expected = sched::referenceCollective(args, inputs, sum);
  for (const algo::Algorithm* alg : cands) {            // every algorithm that implements the collective
    if (std::string(alg->name) == "ho_ring") continue;  // tested over hierarchical shapes in test_ho_ring
    std::vector<sched::Schedule> schedules;
    for (int r = 0; r < n; ++r) {
      sched::CollArgs a = args;
      a.rank = r;
      schedules.push_back(alg->generate(a, topo));
    }
    std::vector<std::vector<double>> got;
    INFO(alg->name << " " << sched::collName(coll) << " n=" << n << " count=" << count << " root=" << root
                   << " inPlace=" << inPlace);
    REQUIRE_NOTHROW(got = sched::runCollective(schedules, args, inputs, inPlace, sum));
    for (int r = 0; r < n; ++r) {
      if (expected[r].empty()) continue;
      INFO("rank " << r);
      REQUIRE(got[r].size() == expected[r].size());
      size_t bad = 0;
      for (size_t i = 0; i < got[r].size(); ++i) bad += !(got[r][i] == expected[r][i]);
      REQUIRE(bad == 0);
    }
  }
}

}  // namespace

TEST_CASE("flat algorithms match the reference for every collective, rank count and awkward count", "[schedules]") {
  std::mt19937 rng(12345);
  const Coll colls[] = {Coll::AllReduce,     Coll::Broadcast, Coll::Reduce, Coll::AllGather,
                        Coll::ReduceScatter, Coll::AlltoAll,  Coll::Gather, Coll::Scatter};
  for (int n = 1; n <= 16; ++n) {
    auto topo = flatTopology(n);
    for (Coll coll : colls) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t(n > 1 ? n - 1 : 0), size_t(n + 1)}) {
        for (bool inPlace : {false, true})
          check(coll, n, count, (n * 7 + static_cast<int>(count)) % n, inPlace, topo, rng);
      }
    }
  }
}

TEST_CASE("large odd counts with small pipelining chunks", "[schedules]") {
  std::mt19937 rng(7);
  for (int n : {2, 3, 5}) {
    auto topo = flatTopology(n);
    for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce})
      for (bool inPlace : {false, true})
        check(coll, n, 1000003 / (coll == Coll::AllGather ? n : 1), n - 1, inPlace, topo, rng, 65536 + 13);
  }
}

TEST_CASE("every root of rooted collectives", "[schedules]") {
  std::mt19937 rng(99);
  for (int n : {2, 4, 7}) {
    auto topo = flatTopology(n, 2);  // several hosts: the ring order differs from rank order
    for (Coll coll : {Coll::Broadcast, Coll::Reduce, Coll::Gather, Coll::Scatter})
      for (int root = 0; root < n; ++root)
        for (bool inPlace : {false, true}) check(coll, n, 1001, root, inPlace, topo, rng, 100);
  }
}

TEST_CASE("the verifier catches broken schedules", "[schedules]") {
  auto sum2 = [](double a, double b) { return a + b; };
  // Both ranks receive first: a deadlock.
  std::vector<sched::Schedule> s(2);
  s[0].steps.push_back({{sched::recv(1, sched::kOutput, 0, 4)}});
  s[0].steps.push_back({{sched::send(1, sched::kInput, 0, 4)}});
  s[1].steps.push_back({{sched::recv(0, sched::kOutput, 0, 4)}});
  s[1].steps.push_back({{sched::send(0, sched::kInput, 0, 4)}});
  sched::CollArgs args;
  args.coll = Coll::AllReduce;
  args.nranks = 2;
  args.count = 4;
  std::vector<std::vector<double>> in(2, std::vector<double>(4, 1.0));
  REQUIRE_THROWS_WITH(sched::runCollective(s, args, in, false, sum2), Catch::Contains("deadlock"));
  // Size mismatch.
  s[0].steps = {{{sched::send(1, sched::kInput, 0, 3)}}};
  s[1].steps = {{{sched::recv(0, sched::kOutput, 0, 4)}}};
  REQUIRE_THROWS_WITH(sched::runCollective(s, args, in, false, sum2), Catch::Contains("size mismatch"));
  // Out of range.
  s[0].steps = {{{sched::send(1, sched::kInput, 2, 4)}}};
  s[1].steps = {{{sched::recv(0, sched::kOutput, 0, 4)}}};
  REQUIRE_THROWS_WITH(sched::runCollective(s, args, in, false, sum2), Catch::Contains("out of range"));
  // A race inside a step.
  s[0].steps = {{{sched::send(1, sched::kOutput, 0, 4), sched::recv(1, sched::kOutput, 2, 2)}}};
  s[1].steps = {{{sched::recv(0, sched::kOutput, 0, 4), sched::send(0, sched::kInput, 0, 2)}}};
  REQUIRE_THROWS_WITH(sched::runCollective(s, args, in, false, sum2), Catch::Contains("race"));
}

TEST_CASE("HOCCL_ALGO names are checked", "[schedules]") {
  REQUIRE(std::string(algo::byName("RING").name) == "ring");
  REQUIRE_THROWS_WITH(algo::byName("tree2"), Catch::Contains("valid names: ring"));
}

TEST_CASE("the ring keeps a host's ranks of one NUMA node together, and stays correct", "[schedules]") {
  // Two hosts of four ranks; the processes alternate between NUMA nodes 0 and 1.
  std::vector<boot::RankInfo> infos(8);
  for (int r = 0; r < 8; ++r) {
    std::snprintf(infos[r].hostId, sizeof(infos[r].hostId), "host%d", r / 4);
    infos[r].rank = r;
    infos[r].numaNode = r % 2;
  }
  auto topo = topo::build(infos);
  REQUIRE(algo::ringOrder(topo) == std::vector<int>{0, 2, 1, 3, 4, 6, 5, 7});
  std::mt19937 rng(3);
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce})
    for (bool inPlace : {false, true}) check(coll, 8, 1001, 5, inPlace, topo, rng, 100);
}
