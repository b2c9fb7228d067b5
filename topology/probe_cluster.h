/// @file probe_cluster.h
/// Switch groups from a measured host-to-host bandwidth matrix (the HOCCL_TOPO_PROBE=1 bandwidth probe, see
/// src/comm/topo_probe.h). Pure functions: every rank computes the same groups from the same all-gathered matrix.
#pragma once

#include <string>
#include <vector>

namespace hoccl::topo {

/// A measured bandwidth matrix: bw[i][j] = MB/s from host i to host j; the diagonal and any entry that is not a
/// positive finite number (not measured, failed) are ignored.
using BandwidthMatrix = std::vector<std::vector<double>>;

/// Default fraction of the fastest pair's bandwidth above which two hosts are put under one switch.
constexpr double kProbeSameSwitchFraction = 0.5;

/// Groups hosts into switches: the bandwidth of a pair is the slower of its two directions, and hosts i and j are
/// linked when that bandwidth is >= fraction x the fastest pair's; the groups are the connected components of that
/// graph. Returns host -> group, groups numbered in order of their lowest host. A matrix with no usable entry puts
/// every host in group 0 (one flat switch). Throws InvalidArgument when the matrix is not square or fraction is not
/// in (0, 1].
std::vector<int> clusterByBandwidth(const BandwidthMatrix& bw, double fraction = kProbeSameSwitchFraction);

/// Rounds of a round-robin tournament over n hosts (n - 1 rounds for even n, n for odd): every pair of hosts meets
/// in exactly one round and a host meets at most one other per round. Returns host's partner in `round`, or -1 when
/// it sits the round out (odd n) or round/host is out of range. Symmetric: partner(partner(h)) == h.
int roundRobinPartner(int host, int round, int nhosts);
/// Number of rounds of roundRobinPartner for n hosts (0 for n < 2).
int roundRobinRounds(int nhosts);

/// The matrix as a few lines of text for logs ("from\\to" header, one row per host, MB/s, "-" where not measured).
std::string formatBandwidthMatrix(const BandwidthMatrix& bw);

}  // namespace hoccl::topo
