// Clustering of the bandwidth probe (HOCCL_TOPO_PROBE=1): hosts whose links are "fast" share a switch.
//
// Pair bandwidth b(i,j) = min(bw[i][j], bw[j][i]) over the directions that were measured (a pair with a direction
// missing or unusable counts as unmeasured). With B = the largest b over all pairs, hosts i and j are linked when
// b(i,j) >= fraction * B, and the switches are the connected components of that graph (union-find, O(n^2)).
// Rationale: on a two-level fabric hosts under one switch see their NIC bandwidth, hosts under different switches
// share an oversubscribed uplink and see a fraction of it; a relative threshold needs no absolute numbers and
// tolerates measurement noise well below a factor of two. Components (rather than cliques) keep a single noisy
// pair inside a switch from splitting it, as long as the hosts are linked through the others.
#include "topology/probe_cluster.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::topo {
namespace {

bool usable(double v) { return std::isfinite(v) && v > 0; }

// The slower direction of pair (i, j), or 0 when a direction is not usable.
double pairBandwidth(const BandwidthMatrix& bw, size_t i, size_t j) {
  if (!usable(bw[i][j]) || !usable(bw[j][i])) return 0;
  return std::min(bw[i][j], bw[j][i]);
}

int findRoot(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

}  // namespace

std::vector<int> clusterByBandwidth(const BandwidthMatrix& bw, double fraction) {
  const size_t n = bw.size();
  for (size_t i = 0; i < n; ++i)
    if (bw[i].size() != n)
      throwInvalidArgument(fmt::format("bandwidth matrix: row {} has {} entries, expected {}", i, bw[i].size(), n));
  if (!(fraction > 0 && fraction <= 1))
    throwInvalidArgument(fmt::format("bandwidth clustering: fraction {} is not in (0, 1]", fraction));
  double best = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) best = std::max(best, pairBandwidth(bw, i, j));
  std::vector<int> group(n, 0);
  if (best <= 0) return group;  // nothing measured: one flat switch
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (pairBandwidth(bw, i, j) >= fraction * best)
        parent[findRoot(parent, static_cast<int>(j))] = findRoot(parent, static_cast<int>(i));
  // Number the components in order of their lowest host.
  std::vector<int> idOfRoot(n, -1);
  int next = 0;
  for (size_t i = 0; i < n; ++i) {
    int root = findRoot(parent, static_cast<int>(i));
    if (idOfRoot[root] < 0) idOfRoot[root] = next++;
    group[i] = idOfRoot[root];
  }
  return group;
}

int roundRobinRounds(int nhosts) {
  if (nhosts < 2) return 0;
  return nhosts % 2 == 0 ? nhosts - 1 : nhosts;
}

// The circle method over m = n rounded up to even slots: slot m-1 stays fixed, the others rotate; in round r the
// fixed slot meets slot r and slot (r+i) meets slot (r-i) (mod m-1). A host meeting slot n (the dummy) sits out.
int roundRobinPartner(int host, int round, int nhosts) {
  if (host < 0 || host >= nhosts || round < 0 || round >= roundRobinRounds(nhosts)) return -1;
  const int m = nhosts + nhosts % 2, k = m - 1;
  int partner;
  if (host == k) partner = round;
  else if (host == round) partner = k;
  else partner = ((2 * round - host) % k + k) % k;  // (r + i) <-> (r - i)
  return partner < nhosts ? partner : -1;
}

std::string formatBandwidthMatrix(const BandwidthMatrix& bw) {
  std::string out = "MB/s from\\to";
  for (size_t j = 0; j < bw.size(); ++j) out += fmt::format(" {:>9}", fmt::format("h{}", j));
  for (size_t i = 0; i < bw.size(); ++i) {
    out += fmt::format("\n{:>12}", fmt::format("h{}", i));
    for (size_t j = 0; j < bw[i].size(); ++j)
      out += i == j || !usable(bw[i][j]) ? fmt::format(" {:>9}", "-") : fmt::format(" {:>9.1f}", bw[i][j]);
  }
  return out;
}

}  // namespace hoccl::topo
