// Topology: host lists, topology files (JSON and Slurm), precedence of switch sources, grouping from rank info,
// the level structure for regular and uneven shapes, rings, and hwloc discovery.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>

#include "base/error.h"
#include "base/params.h"
#include "topology/host_hw.h"
#include "topology/topology.h"

using namespace hoccl;

namespace {

// A temporary file removed at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/hoccl_topo_XXXXXX";
    int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    close(fd);
    path = name;
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// Sets (or unsets, with nullptr) an environment variable for the scope.
struct Env {
  std::string name;
  explicit Env(const char* n, const char* value) : name(n) {
    if (value) setenv(n, value, 1);
    else unsetenv(n);
  }
  ~Env() { unsetenv(name.c_str()); }
};

boot::RankInfo info(int rank, const char* host, const char* sw) {
  boot::RankInfo r;
  r.rank = rank;
  std::snprintf(r.hostId, sizeof(r.hostId), "%s", host);
  std::snprintf(r.switchId, sizeof(r.switchId), "%s", sw);
  return r;
}

}  // namespace

TEST_CASE("Slurm host lists expand", "[topology]") {
  using V = std::vector<std::string>;
  CHECK(topo::expandHostList("h[1-3]") == V{"h1", "h2", "h3"});
  CHECK(topo::expandHostList("n[08-10],login") == V{"n08", "n09", "n10", "login"});
  CHECK(topo::expandHostList("a[1,3-4]") == V{"a1", "a3", "a4"});
  CHECK(topo::expandHostList("r[1-2]-n[1-2]") == V{"r1-n1", "r1-n2", "r2-n1", "r2-n2"});
  CHECK(topo::expandHostList("solo") == V{"solo"});
  CHECK_THROWS_AS(topo::expandHostList("h[1-3"), Error);
  CHECK_THROWS_AS(topo::expandHostList("h1-3]"), Error);
  CHECK_THROWS_AS(topo::expandHostList("h[3-1]"), Error);
  CHECK_THROWS_AS(topo::expandHostList("h[a-b]"), Error);
}

TEST_CASE("topology files: JSON in two forms and Slurm topology.conf", "[topology]") {
  TempFile json(R"({"switches": {"leaf1": ["h1", "h2"], "leaf2": ["h[3-4]"]}})");
  auto m = topo::readTopologyFile(json.path);
  CHECK(m.switches == std::vector<std::string>{"leaf1", "leaf2"});
  CHECK(m.switchOf("h3") == "leaf2");
  CHECK(m.switchOf("h2:0b1e-boot-id") == "leaf1");  // host id = hostname:bootid
  CHECK(m.switchOf("h1.cluster.example") == "leaf1");
  CHECK(m.switchOf("h9") == "");

  TempFile list(R"({"switches": [{"name": "a", "hosts": ["x"]}, {"name": "b", "hosts": ["y", "z"]}]})");
  auto t = topo::fromSwitchMap(topo::readTopologyFile(list.path), 2);
  CHECK(t.nranks == 6);
  CHECK(t.nswitches == 2);
  CHECK(t.switchNames == std::vector<std::string>{"a", "b"});
  CHECK(t.hostNames == std::vector<std::string>{"x", "y", "z"});
  CHECK(t.switchOf == std::vector<int>{0, 0, 1, 1, 1, 1});

  TempFile slurm(
      "# a comment\nSwitchName=s1 Nodes=node[1-2] LinkSpeed=100\nSwitchName=s2 Nodes=node[3-4]\n"
      "SwitchName=top Switches=s[1-2]\n");
  auto sm = topo::readTopologyFile(slurm.path);
  CHECK(sm.switches == std::vector<std::string>{"s1", "s2"});
  CHECK(sm.switchOf("node4") == "s2");

  TempFile bad1(R"({"switches": 3})"), bad2("{not json"), bad3("nothing here\n"),
      dup(R"({"switches": {"a": ["h1"], "b": ["h1"]}})");
  CHECK_THROWS_WITH(topo::readTopologyFile(bad1.path), Catch::Contains(bad1.path));
  CHECK_THROWS_WITH(topo::readTopologyFile(bad2.path), Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(topo::readTopologyFile(bad3.path), Catch::Contains("SwitchName=s1"));
  CHECK_THROWS_WITH(topo::readTopologyFile(dup.path), Catch::Contains("again under"));
  CHECK_THROWS_WITH(topo::readTopologyFile("/nonexistent/topo.json"), Catch::Contains("cannot read"));
}

// Found while writing the fuzz target tests/fuzz/fuzz_topology.cc (whose limits and invariants now guard them): a few
// bytes of brackets expanded to 10^10 names, a large file took quadratic time to check for repeated hosts, and a
// repeated switch put its hosts twice into the topology.
TEST_CASE("topology files: bounded host lists, repeated switches, large files in linear time", "[topology][fuzz]") {
  CHECK_THROWS_WITH(topo::expandHostList("n[0-99999]m[0-99999]"), Catch::Contains("names more than"));
  CHECK(topo::expandHostList("n[0-99999],m[0-99999]").size() == 200000);
  CHECK_THROWS_WITH(topo::parseTopologyText("SwitchName=s1 Nodes=a1\nSwitchName=s1 Nodes=a2\n", "t"),
                    Catch::Contains("switch 's1' is listed twice"));
  CHECK_THROWS_WITH(
      topo::parseTopologyText(R"({"switches": [{"name": "s", "hosts": ["a"]}, {"name": "s", "hosts": ["b"]}]})", "t"),
      Catch::Contains("listed twice"));
  // 2 x 100,000 hosts: a scan per host would take 2 * 10^10 comparisons.
  const auto start = std::chrono::steady_clock::now();
  auto big = topo::parseTopologyText("SwitchName=s1 Nodes=a[0-99999]\nSwitchName=s2 Nodes=b[0-99999]\n", "t");
  CHECK(big.hostSwitch.size() == 200000);
  CHECK(big.switchOf("b77") == "s2");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  CHECK_THROWS_WITH(topo::parseTopologyText("SwitchName=s1 Nodes=a[0-99999]\nSwitchName=s2 Nodes=a[5]\n", "t"),
                    Catch::Contains("host 'a5' is listed under switch 's1' and again under 's2'"));
}

TEST_CASE("switch id precedence: file, HOCCL_SWITCH_ID, SLURM_TOPOLOGY_ADDR, flat", "[topology]") {
  TempFile json(R"({"switches": {"fromfile": ["hostA"]}})");
  Env a("HOCCL_TOPO_FILE", nullptr), b("HOCCL_SWITCH_ID", nullptr), c("SLURM_TOPOLOGY_ADDR", nullptr);
  CHECK(topo::localSwitchId("hostA") == "");
  setenv("SLURM_TOPOLOGY_ADDR", "spine.leaf7.hostA", 1);
  CHECK(topo::localSwitchId("hostA") == "spine.leaf7");
  setenv("HOCCL_SWITCH_ID", "env", 1);
  CHECK(topo::localSwitchId("hostA") == "env");
  setenv("HOCCL_TOPO_FILE", json.path.c_str(), 1);
  CHECK(topo::localSwitchId("hostA") == "fromfile");
  CHECK(topo::localSwitchId("hostB") == "env");  // not in the file: next source
  {
    Env h("HOCCL_HOSTID", "emulated-7");
    CHECK(topo::localHostId() == "emulated-7");
  }
  CHECK(topo::localHostId().find(':') != std::string::npos);
}

TEST_CASE("the NCCL shim's NCCL_TOPO_FILE reaches the topology", "[topology]") {
  TempFile json(R"({"switches": {"ncclfile": ["hostN"]}})");
  Env a("HOCCL_TOPO_FILE", nullptr), b("HOCCL_SWITCH_ID", nullptr), c("SLURM_TOPOLOGY_ADDR", nullptr);
  Env d("NCCL_TOPO_FILE", json.path.c_str());
  CHECK(topo::localSwitchId("hostN") == "");  // NCCL_ names count only once the shim enabled them
  hoccl::params::enableNcclNames();
  CHECK(topo::localSwitchId("hostN") == "ncclfile");
}

TEST_CASE("build groups ranks by host and switch", "[topology]") {
  auto t = topo::build(
      {info(0, "hA", "s1"), info(1, "hB", "s2"), info(2, "hA", "s1"), info(3, "hC", "s1"), info(4, "hB", "other")});
  CHECK(t.nranks == 5);
  CHECK(t.nhosts == 3);
  CHECK(t.nswitches == 2);
  CHECK(t.hostOf == std::vector<int>{0, 1, 0, 2, 1});
  CHECK(t.switchOf == std::vector<int>{0, 1, 0, 0, 1});  // rank 4 follows its host's first rank
  CHECK(t.localIndex == std::vector<int>{0, 0, 1, 0, 1});
  CHECK(t.linkClass(0, 0) == hocclLinkSelf);
  CHECK(t.linkClass(0, 2) == hocclLinkIntraHost);
  CHECK(t.linkClass(0, 3) == hocclLinkIntraSwitch);
  CHECK(t.linkClass(0, 1) == hocclLinkInterSwitch);
  CHECK(topo::flatRingOrder(t) == std::vector<int>{0, 2, 3, 1, 4});
  auto flat = topo::build({info(0, "x", ""), info(1, "y", "")});
  CHECK(flat.nswitches == 1);
}

TEST_CASE("hierarchy: regular shapes have host, switch and spine levels", "[topology]") {
  auto h = topo::hierarchy(topo::fromShape(2, 3, 4));
  CHECK(h.sizes == std::vector<int>{4, 3, 2});
  CHECK(h.names == std::vector<std::string>{"host", "switch", "spine"});
  CHECK(h.note == "regular");
  auto rings = topo::levelRings(h, 2);
  REQUIRE(rings.size() == 12);
  CHECK(rings[0] == std::vector<int>{0, 12});
  CHECK(topo::levelRings(h, 1)[1] == std::vector<int>{1, 5, 9});
  CHECK(topo::levelRings(h, 0)[0] == std::vector<int>{0, 1, 2, 3});
  CHECK(topo::hierarchy(topo::fromShape(1, 1, 4)).sizes == std::vector<int>{4});
  CHECK(topo::hierarchy(topo::fromShape(2, 1, 1)).names == std::vector<std::string>{"spine"});
  CHECK(topo::hierarchy(topo::fromShape(1, 1, 1)).levels() == 0);
}

TEST_CASE("hierarchy: uneven shapes fall back level by level", "[topology]") {
  auto evenHosts = topo::hierarchy(topo::fromCounts({{2, 2}, {2, 2, 2}}));
  CHECK(evenHosts.sizes == std::vector<int>{2, 5});
  auto evenSwitches = topo::hierarchy(topo::fromCounts({{1, 3}, {2, 2}}));
  CHECK(evenSwitches.sizes == std::vector<int>{4, 2});
  CHECK(evenSwitches.names == std::vector<std::string>{"switch", "spine"});
  auto flat = topo::hierarchy(topo::fromCounts({{3, 1}, {2}}));
  CHECK(flat.sizes == std::vector<int>{6});
  CHECK(flat.note.find("flat") != std::string::npos);
  // Any shape: coordinates are a bijection onto the mixed-radix product and rings have the level's size.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::vector<int>> shape(1 + rng() % 4);
    for (auto& sw : shape) {
      sw.resize(1 + rng() % 4);
      for (auto& g : sw) g = 1 + static_cast<int>(rng() % 4);
    }
    auto t = topo::fromCounts(shape);
    auto h = topo::hierarchy(t);
    int product = 1;
    for (int s : h.sizes) {
      CHECK(s >= 2);
      product *= s;
    }
    REQUIRE(product == t.nranks);
    std::set<int> seen(h.rankAt.begin(), h.rankAt.end());
    CHECK(static_cast<int>(seen.size()) == t.nranks);
    for (int lv = 0; lv < h.levels(); ++lv)
      for (const auto& ring : topo::levelRings(h, lv)) CHECK(static_cast<int>(ring.size()) == h.sizes[lv]);
  }
}

TEST_CASE("synthetic shapes reject bad sizes", "[topology]") {
  CHECK_THROWS_AS(topo::fromShape(0, 1, 1), Error);
  CHECK_THROWS_AS(topo::fromCounts({}), Error);
  CHECK_THROWS_AS(topo::fromCounts({{1, 0}}), Error);
}

TEST_CASE("hwloc discovers this host", "[topology]") {
  auto hw = topo::discoverHost();
  CHECK(hw.error == "");
  CHECK(hw.numaNodes >= 1);
  CHECK(hw.pus >= hw.cores);
  CHECK(hw.cores >= 1);
}
