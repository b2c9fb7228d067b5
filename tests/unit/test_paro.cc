// PaRO mapper: strategy names, group layout, shard maps, memory, the step plan (bytes against hand-derived ring
// volumes), the time model and the ranking. No communicator: pure math.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <functional>
#include <unistd.h>
#include <set>

#include "base/error.h"
#include "paro/layout.h"
#include "paro/plan.h"
#include "paro/strategy.h"

using namespace hoccl::paro;

namespace {

Layout hostLayout(int nranks, int perHost, int hostsPerSwitch = 0) {
  return makeLayout(regularTopology(nranks, perHost, hostsPerSwitch), GroupLevel::Host);
}

hocclResult_t codeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const hoccl::Error& e) {
    return e.code();
  }
  return hocclSuccess;
}

}  // namespace

TEST_CASE("strategy names: 27 letters, any case, aliases, clear errors", "[paro]") {
  auto all = allStrategies();
  REQUIRE(all.size() == 27);
  std::set<std::string> names;
  for (const auto& s : all) {
    names.insert(s.name());
    CHECK(parseStrategy(s.name()) == s);
    std::string lower = s.name();
    for (auto& c : lower) c = static_cast<char>(std::tolower(c));
    CHECK(parseStrategy(lower) == s);
  }
  CHECK(names.size() == 27);
  CHECK(parseStrategy("iIg").name() == "IIG");
  CHECK(parseStrategy("ddp").name() == "NNN");
  CHECK(parseStrategy("ZeRO1").name() == "NNG");
  CHECK(parseStrategy("zero2").name() == "NGG");
  CHECK(parseStrategy("zero3").name() == "GGG");
  CHECK(parseStrategy("mics").name() == "III");
  CHECK(parseStrategy("HSDP").name() == "III");
  CHECK(parseStrategy("GGG").alias() == "ZeRO-3");
  for (const char* bad : {"", "NN", "NNNN", "NXG", "zero4", "I I", "123"})
    CHECK(codeOf([&] { parseStrategy(bad); }) == hocclInvalidArgument);
  try {
    parseStrategy("NXG");
    FAIL("no error");
  } catch (const hoccl::Error& e) {
    CHECK(std::string(e.what()).find("'NXG'") != std::string::npos);
  }
  CHECK(parseGroupLevel("Switch") == GroupLevel::Switch);
  CHECK(codeOf([] { parseGroupLevel("rack"); }) == hocclInvalidArgument);
}

TEST_CASE("layout: groups by host or switch, local indices, uneven fallback", "[paro]") {
  Layout l = hostLayout(8, 4);
  CHECK(l.groupSize == 4);
  CHECK(l.ngroups == 2);
  CHECK(l.note.empty());
  for (int r = 0; r < 8; ++r) {
    CHECK(l.groupOf[r] == r / 4);
    CHECK(l.localOf[r] == r % 4);
    CHECK(l.rankAt(r / 4, r % 4) == r);
  }
  Layout sw = makeLayout(regularTopology(16, 2, 4), GroupLevel::Switch);
  CHECK(sw.groupSize == 8);
  CHECK(sw.ngroups == 2);
  CHECK(sw.groupOf[9] == 1);
  CHECK(sw.localOf[9] == 1);
  // Interleaved hosts: ranks 0,2,4 on host A and 1,3,5 on host B.
  hoccl::topo::Topology t;
  t.nranks = 6;
  t.nhosts = 2;
  t.nswitches = 1;
  for (int r = 0; r < 6; ++r) {
    t.hostOf.push_back(r % 2);
    t.switchOf.push_back(0);
    t.localIndex.push_back(r / 2);
  }
  Layout il = makeLayout(t, GroupLevel::Host);
  CHECK(il.members[0] == std::vector<int>{0, 2, 4});
  CHECK(il.members[1] == std::vector<int>{1, 3, 5});
  CHECK(il.localOf[3] == 1);
  // Uneven: a host of 3 and a host of 1 -> groups of one rank, with a note.
  t.nranks = 4;
  t.hostOf = {0, 0, 0, 1};
  t.switchOf = {0, 0, 0, 0};
  t.localIndex = {0, 1, 2, 0};
  Layout ul = makeLayout(t, GroupLevel::Host);
  CHECK(ul.groupSize == 1);
  CHECK(ul.ngroups == 4);
  CHECK_FALSE(ul.note.empty());
  CHECK(codeOf([] { regularTopology(10, 4, 0); }) == hocclInvalidArgument);
  CHECK(codeOf([] { regularTopology(16, 4, 3); }) == hocclInvalidArgument);
}

TEST_CASE("shards: every level partitions the padded buffer; G nests in I; same-shard groups agree", "[paro]") {
  for (auto [n, per] : {std::pair{8, 4}, {12, 3}, {6, 1}, {4, 4}, {1, 1}}) {
    Layout l = hostLayout(n, per);
    for (uint64_t count : {0ull, 1ull, 7ull, 1000ull, 1001ull, 12345ull}) {
      const uint64_t padded = paddedCount(count, n);
      CHECK(padded % static_cast<uint64_t>(n) == 0);
      CHECK(padded >= count);
      CHECK(padded < count + static_cast<uint64_t>(n));
      for (Level lv : {Level::N, Level::I, Level::G}) {
        // Coverage: each element is in exactly the shards of one same-shard group.
        std::vector<int> owners(padded, 0);
        auto groups = sameShardGroups(l, lv);
        CHECK(static_cast<int>(groups.size()) == shardCount(l, lv));
        std::set<int> seen;
        for (const auto& grp : groups) {
          const Range r0 = shardRange(l, lv, grp[0], count);
          CHECK(r0.size() == padded / static_cast<uint64_t>(shardCount(l, lv)));
          for (int r : grp) {
            CHECK(seen.insert(r).second);
            const Range ri = shardRange(l, lv, r, count);
            CHECK(ri.begin == r0.begin);
            CHECK(ri.end == r0.end);
          }
          for (uint64_t i = r0.begin; i < r0.end; ++i) owners[i]++;
        }
        CHECK(static_cast<int>(seen.size()) == n);
        for (int o : owners) CHECK(o == 1);
      }
      for (int r = 0; r < n; ++r) {
        const Range gi = shardRange(l, Level::G, r, count), ii = shardRange(l, Level::I, r, count);
        CHECK(gi.begin >= ii.begin);
        CHECK(gi.end <= ii.end);
        // Block g of the inter view of the I-shard, as the runtime's reduce-scatter across groups leaves it.
        CHECK(gi.begin - ii.begin == static_cast<uint64_t>(l.groupOf[r]) * gi.size());
        const Range u = shardRangeUnpadded(l, Level::G, r, count);
        CHECK(u.end <= count);
      }
    }
  }
  Layout l = hostLayout(8, 4);
  auto red = sameShardGroups(l, Level::I);
  REQUIRE(red.size() == 4);
  CHECK(red[1] == std::vector<int>{1, 5});
}

TEST_CASE("memory per rank follows 2Psi/dP + 2Psi'/dG + 12Psi'/dOS", "[paro]") {
  Layout l = hostLayout(32, 8);
  ModelSize size;
  size.params = 7000000000ull;
  size.trainable = 700000000ull;
  const double psi = 7e9, psit = 7e8, m = 8, n = 32;
  for (const Strategy& s : allStrategies()) {
    auto d = [&](Level lv) { return lv == Level::N ? 1.0 : lv == Level::I ? m : n; };
    const double expect = 2 * psi / d(s.p) + 2 * psit / d(s.g) + 12 * psit / d(s.os);
    CHECK(memoryPerRank(l, s, size).total == Approx(expect).epsilon(1e-12));
  }
  size.trainable = size.params;
  CHECK(memoryPerRank(l, parseStrategy("NNN"), size).total == Approx(16 * 7e9));
  CHECK(memoryPerRank(l, parseStrategy("GGG"), size).total == Approx(16 * 7e9 / 32));
  CHECK(memoryPerRank(l, parseStrategy("IIG"), size).total == Approx(2 * 7e9 / 8 + 2 * 7e9 / 8 + 12 * 7e9 / 32));
}

TEST_CASE("plan: bytes are the ring volumes, inter-group traffic once per step unless P or G is global", "[paro]") {
  const int n = 8, m = 4, ng = 2, A = 3;
  Layout l = hostLayout(n, m);
  ModelSize size;
  size.params = size.trainable = 1001;  // odd: padded to 1008, b = 126
  size.bytesP = 2;
  size.bytesG = 4;
  const uint64_t b = 126;
  auto sent = [&](const char* s) { return makePlan(l, parseStrategy(s), size, A).sentPerRankPerStep(); };
  // NNN: one global ring all-reduce of the padded buffer per step.
  CHECK(sent("NNN") == 2ull * (n - 1) * b * 4);
  // IIG: 2A intra all-gathers of P, A intra reduce-scatters of G, one inter RS of G, one inter AG of P.
  CHECK(sent("IIG") ==
        2ull * A * (m - 1) * ng * b * 2 + 1ull * A * (m - 1) * ng * b * 4 + (ng - 1) * b * 4 + (ng - 1) * b * 2);
  // GGG: per micro-step two two-level gathers of P and a two-level reduce-scatter of G; nothing per step.
  CHECK(sent("GGG") == 2ull * A * (n - 1) * b * 2 + 1ull * A * (n - 1) * b * 4);
  // NNG (ZeRO-1): per step: two-level reduce-scatter of G, two-level all-gather of P.
  CHECK(sent("NNG") == (n - 1) * b * 4 + (n - 1) * b * 2);
  // III: 2A intra AG, A intra RS, one inter all-reduce of the I-shard.
  CHECK(sent("III") == 2ull * A * (m - 1) * ng * b * 2 + 1ull * A * (m - 1) * ng * b * 4 + 2 * (ng - 1) * b * 4);
  // NIG: A intra RS of G; inter RS per step; P rebuilt by inter AG + intra AG.
  CHECK(sent("NIG") == 1ull * A * (m - 1) * ng * b * 4 + (ng - 1) * b * 4 + (n - 1) * b * 2);
  for (const Strategy& s : allStrategies()) {
    Plan p = makePlan(l, s, size, A);
    uint64_t interA = 0, interB = 0;
    for (const auto& e : p.entries) {
      CHECK(e.commSize > 1);
      if (e.comm == CommKind::Inter) interA += e.sentPerRank * e.perStep;
      CHECK(e.perStep == static_cast<uint64_t>(e.perOccurrence) * (e.when == When::MicroStep ? A : 1));
    }
    for (const auto& e : makePlan(l, s, size, A + 2).entries)
      if (e.comm == CommKind::Inter) interB += e.sentPerRank * e.perStep;
    const bool global = s.p == Level::G || s.g == Level::G;
    INFO(s.name());
    CHECK((interA != interB) == global);
    // Per link class on 2 hosts of 4: intra entries stay on the host, inter ones cross it.
    for (int r = 0; r < n; ++r) {
      auto byClass = p.sentByClass(l, r);
      CHECK(byClass[0] + byClass[1] + byClass[2] + byClass[3] == p.sentPerRankPerStep());
      CHECK(byClass[hocclLinkInterSwitch] == 0);
    }
  }
  // One group (everyone on one host): nothing crosses hosts; one rank: nothing at all.
  Layout one = hostLayout(4, 4);
  for (const Strategy& s : allStrategies())
    CHECK(makePlan(one, s, size, A).sentByClass(one, 2)[hocclLinkIntraSwitch] == 0);
  Layout solo = hostLayout(1, 1);
  for (const Strategy& s : allStrategies()) CHECK(makePlan(solo, s, size, A).entries.empty());
  CHECK(codeOf([&] { makePlan(l, parseStrategy("IIG"), size, 0); }) == hocclInvalidArgument);
  ModelSize bad = size;
  bad.trainable = bad.params + 1;
  CHECK(codeOf([&] { makePlan(l, parseStrategy("IIG"), bad, 1); }) == hocclInvalidArgument);
}

TEST_CASE("time model: slow inter-host links favour partial redundancy; ranking respects the budget", "[paro]") {
  Layout l = hostLayout(32, 8);
  ModelSize size;
  size.params = size.trainable = 7000000000ull;
  LinkModel links = LinkModel::defaults();
  auto t = [&](const char* s, int A) { return predictStepTime(l, makePlan(l, parseStrategy(s), size, A), links); };
  CHECK(t("IIG", 8) < t("GGG", 8));
  CHECK(t("IIG", 8) < t("NNN", 8) * 8);  // NNN is cheap in bytes but needs 16 bytes/param
  CHECK(t("NNN", 1) > 0);
  // A global ring all-reduce of S over 4 hosts of 8: each host NIC carries 2(N-1)/N*S once.
  PlanEntry e = makePlan(l, parseStrategy("NNN"), size, 1).entries.at(0);
  const double expect = 2 * 31 * links.alpha[2] + static_cast<double>(e.sentPerRank) / links.bw[2];
  CHECK(predictCallTime(l, e, links) == Approx(expect));
  const double budget = 80.0 * (1ull << 30);
  auto ranked = rankStrategies(l, size, 4, budget, links);
  REQUIRE(ranked.size() == 27);
  bool seenMiss = false;
  for (size_t i = 0; i < ranked.size(); ++i) {
    CHECK(ranked[i].fits == (ranked[i].memory.total <= budget));
    if (!ranked[i].fits) seenMiss = true;
    CHECK((ranked[i].fits && seenMiss) == false);  // fitting ones first
    if (i > 0 && ranked[i].fits) CHECK(ranked[i - 1].seconds <= ranked[i].seconds);
  }
  CHECK_FALSE(ranked.back().fits);  // NNN needs 112 GB
  CHECK(rankStrategies(l, size, 4, 1.0, links).front().fits == false);
  CHECK(rankStrategies(l, size, 4, 0, links).front().fits);
}

TEST_CASE("topology files: switches -> hosts, with rank counts", "[paro]") {
  const std::string path = "/tmp/hoccl_paro_topo_test_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream f(path);
    f << R"({"switches": [{"name": "s0", "hosts": ["a", "b"]}, {"name": "s1", "hosts": [{"name": "c", "ranks": 2}, "d"]}]})";
  }
  auto t = topologyFromFile(path, 2);
  CHECK(t.nranks == 8);
  CHECK(t.nhosts == 4);
  CHECK(t.nswitches == 2);
  CHECK(t.switchOf[5] == 1);
  CHECK(t.linkClass(0, 5) == hocclLinkInterSwitch);
  CHECK(t.linkClass(0, 3) == hocclLinkIntraSwitch);
  Layout l = makeLayout(t, GroupLevel::Switch);
  CHECK(l.groupSize == 4);
  {
    std::ofstream f(path);
    f << R"({"switches": {"s0": ["a"], "s1": ["b"]}})";
  }
  CHECK(topologyFromFile(path, 3).nranks == 6);
  {
    std::ofstream f(path);
    f << "{not json";
  }
  CHECK(codeOf([&] { topologyFromFile(path, 1); }) == hocclInvalidArgument);
  {
    std::ofstream f(path);
    f << R"({"hosts": []})";
  }
  CHECK(codeOf([&] { topologyFromFile(path, 1); }) == hocclInvalidArgument);
  std::remove(path.c_str());
  CHECK(codeOf([&] { topologyFromFile(path, 1); }) == hocclInvalidArgument);
}
