// The clustering behind HOCCL_TOPO_PROBE=1 (topology/probe_cluster.h) on synthetic bandwidth matrices, checked
// against the groups the matrices were built from, and the round-robin schedule the probe meets in.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "base/error.h"
#include "topology/probe_cluster.h"

using namespace hoccl;

namespace {

// A matrix where hosts of the same group (truth[i] == truth[j]) see `fast` MB/s and others `slow`, each entry
// multiplied by a random factor in [1 - noise, 1 + noise].
topo::BandwidthMatrix synthetic(const std::vector<int>& truth, double fast, double slow, double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
  const size_t n = truth.size();
  topo::BandwidthMatrix bw(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (i != j) bw[i][j] = (truth[i] == truth[j] ? fast : slow) * jitter(rng);
  return bw;
}

}  // namespace

TEST_CASE("probe clustering: two fast groups", "[topology][probe]") {
  // 2 switches x 2 hosts, hosts numbered switch by switch.
  CHECK(topo::clusterByBandwidth(synthetic({0, 0, 1, 1}, 2000, 25, 0, 1)) == std::vector<int>{0, 0, 1, 1});
  // Interleaved: groups are numbered by their lowest host, whatever the host order.
  CHECK(topo::clusterByBandwidth(synthetic({0, 1, 0, 1, 1}, 1000, 100, 0, 2)) == std::vector<int>{0, 1, 0, 1, 1});
  // Three switches of uneven size.
  CHECK(topo::clusterByBandwidth(synthetic({0, 0, 0, 1, 2, 2}, 1200, 300, 0, 3)) == std::vector<int>{0, 0, 0, 1, 2, 2});
}

TEST_CASE("probe clustering: one group when all links are alike", "[topology][probe]") {
  CHECK(topo::clusterByBandwidth(synthetic({0, 0, 0, 0}, 1000, 1000, 0, 4)) == std::vector<int>(4, 0));
  // Up to a factor of two apart still counts as one switch (the threshold is 0.5 x the fastest pair).
  topo::BandwidthMatrix bw = synthetic({0, 0, 0}, 1000, 1000, 0, 5);
  bw[0][2] = bw[2][0] = 500;
  CHECK(topo::clusterByBandwidth(bw) == std::vector<int>(3, 0));
  bw[0][2] = bw[2][0] = 499;  // 0-2 is slow but both are linked through host 1: still one component
  CHECK(topo::clusterByBandwidth(bw) == std::vector<int>(3, 0));
}

TEST_CASE("probe clustering: lone hosts", "[topology][probe]") {
  // Host 2 is slow to everyone: a switch of its own.
  CHECK(topo::clusterByBandwidth(synthetic({0, 0, 1, 0}, 900, 90, 0, 6)) == std::vector<int>{0, 0, 1, 0});
  // Every host alone: pairs (0,1) fast, then all others far below.
  topo::BandwidthMatrix bw = synthetic({0, 1, 2, 3}, 0, 10, 0, 7);
  bw[0][1] = bw[1][0] = 100;
  CHECK(topo::clusterByBandwidth(bw) == std::vector<int>{0, 0, 1, 2});
  // A single host and an empty matrix.
  CHECK(topo::clusterByBandwidth(topo::BandwidthMatrix{{0.0}}) == std::vector<int>{0});
  CHECK(topo::clusterByBandwidth(topo::BandwidthMatrix{}).empty());
}

TEST_CASE("probe clustering: noisy measurements", "[topology][probe]") {
  // +-30% noise on every entry, a 10x gap between the levels: the true groups come back, for many seeds and shapes.
  std::mt19937 rng(42);
  for (unsigned seed = 0; seed < 200; ++seed) {
    int n = 3 + static_cast<int>(rng() % 10), groups = 1 + static_cast<int>(rng() % 4);
    std::vector<int> truth(n);
    for (int i = 0; i < n; ++i) truth[i] = static_cast<int>(rng() % groups);
    // Expected numbering: in order of the lowest host of each group.
    std::vector<int> relabel(groups, -1), want(n);
    int next = 0;
    for (int i = 0; i < n; ++i) {
      if (relabel[truth[i]] < 0) relabel[truth[i]] = next++;
      want[i] = relabel[truth[i]];
    }
    if (next == n) continue;  // no two hosts share a group: nothing fast to compare with (see "lone hosts")
    INFO("seed " << seed << " n " << n << " groups " << groups);
    CHECK(topo::clusterByBandwidth(synthetic(truth, 2500, 250, 0.3, seed)) == want);
  }
}

TEST_CASE("probe clustering: the slower direction counts, unusable entries are ignored", "[topology][probe]") {
  topo::BandwidthMatrix bw = synthetic({0, 0, 1, 1}, 1000, 50, 0, 8);
  bw[2][3] = 60;  // 2 -> 3 slow: the pair is slow even though 3 -> 2 is fast
  CHECK(topo::clusterByBandwidth(bw) == std::vector<int>{0, 0, 1, 2});
  bw = synthetic({0, 0, 1, 1}, 1000, 50, 0, 9);
  bw[0][2] = bw[2][0] = std::numeric_limits<double>::infinity();  // not a measurement: ignored, not "fastest"
  bw[1][3] = std::nan("");
  bw[3][0] = -5;
  CHECK(topo::clusterByBandwidth(bw) == std::vector<int>{0, 0, 1, 1});
  // Nothing usable at all: one flat switch.
  CHECK(topo::clusterByBandwidth(topo::BandwidthMatrix(3, std::vector<double>(3, 0.0))) == std::vector<int>(3, 0));
}

TEST_CASE("probe clustering: bad input is an error", "[topology][probe]") {
  CHECK_THROWS_AS(topo::clusterByBandwidth({{0, 1}, {1}}), Error);
  CHECK_THROWS_AS(topo::clusterByBandwidth(synthetic({0, 0}, 1, 1, 0, 1), 0.0), Error);
  CHECK_THROWS_AS(topo::clusterByBandwidth(synthetic({0, 0}, 1, 1, 0, 1), 1.5), Error);
  // A stricter fraction splits what the default keeps together.
  CHECK(topo::clusterByBandwidth(synthetic({0, 0, 1}, 1000, 600, 0, 1)) == std::vector<int>{0, 0, 0});
  CHECK(topo::clusterByBandwidth(synthetic({0, 0, 1}, 1000, 600, 0, 1), 0.9) == std::vector<int>{0, 0, 1});
}

TEST_CASE("probe schedule: every pair of hosts meets exactly once", "[topology][probe]") {
  for (int n = 0; n <= 17; ++n) {
    INFO("hosts " << n);
    CHECK(topo::roundRobinRounds(n) == (n < 2 ? 0 : n % 2 ? n : n - 1));
    std::set<std::pair<int, int>> met;
    for (int r = 0; r < topo::roundRobinRounds(n); ++r) {
      int sitting = 0;
      for (int h = 0; h < n; ++h) {
        int p = topo::roundRobinPartner(h, r, n);
        if (p < 0) {
          ++sitting;
          continue;
        }
        REQUIRE(p != h);
        REQUIRE(p < n);
        REQUIRE(topo::roundRobinPartner(p, r, n) == h);  // symmetric
        if (h < p) CHECK(met.emplace(h, p).second);      // never twice
      }
      CHECK(sitting == n % 2);
    }
    CHECK(met.size() == static_cast<size_t>(n * (n - 1) / 2));
  }
  CHECK(topo::roundRobinPartner(0, 3, 4) == -1);
  CHECK(topo::roundRobinPartner(4, 0, 4) == -1);
  CHECK(topo::roundRobinPartner(-1, 0, 4) == -1);
}

TEST_CASE("probe matrix text names hosts and skips unmeasured entries", "[topology][probe]") {
  std::string text = topo::formatBandwidthMatrix({{0, 1234.5}, {-1, 0}});
  CHECK(text.find("h1") != std::string::npos);
  CHECK(text.find("1234.5") != std::string::npos);
  CHECK(text.find("-1") == std::string::npos);
}
