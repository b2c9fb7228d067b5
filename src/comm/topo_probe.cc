// The bandwidth probe of HOCCL_TOPO_PROBE=1 (topology source of last resort before the flat switch).
//
//   1. Host leaders (the lowest rank of each host) meet in the rounds of a round-robin tournament
//      (topo::roundRobinPartner), so every pair meets once and nobody waits on a busy partner for long; the other
//      ranks do nothing until step 2.
//   2. In a meeting (a, b), a < b: a handshake (both present), then a -> b, then b -> a. One direction: the sender
//      sends an 8-byte header with the payload size, the payload (4 MiB), and waits for an 8-byte ack; it times
//      header-to-ack. At most 3 repetitions, fewer once the direction has used its time budget (a slow link needs
//      one); the median is kept. A header of 0 ends the direction. The sender records MB/s in its row.
//   3. Every rank all-gathers one row per rank through the bootstrap (non-leaders send zeros); the matrix is the
//      leaders' rows. topo::clusterByBandwidth turns it into groups, identical on every rank.
// Pairs of one round run at the same time and may share an uplink: cross-switch pairs then measure less, which
// only widens the gap that the clustering looks for.
#include "comm/topo_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "comm/communicator.h"
#include "base/error.h"
#include "base/log.h"
#include "base/wait.h"
#include "base/params.h"
#include "topology/probe_cluster.h"

namespace hoccl {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPayloadBytes = size_t{4} << 20;
constexpr int kMaxReps = 3;
constexpr auto kDirectionBudget = std::chrono::milliseconds(60);

// Blocking point-to-point on one channel, with the communicator's deadline and abort flag.
class Link {
 public:
  Link(Communicator& comm, int peer) : comm_(comm), peer_(peer), ch_(comm.channel(peer)) {}
  void send(const void* data, size_t bytes) { ch_.postSend(data, bytes); }
  void recv(void* data, size_t bytes) {
    transport::RecvTarget t;
    t.direct = data;
    ch_.postRecv(bytes, std::move(t));
  }
  // Progresses until every posted operation is complete.
  void wait(const char* what) {
    static const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
    const auto deadline = Clock::now() + timeout;
    Backoff backoff(comm_.waitPolicy());
    while (ch_.pending() > 0) {
      comm_.health().check(comm_.describe(), "topology probe");
      if (ch_.progress()) {
        backoff.reset();
        continue;
      }
      if (Clock::now() > deadline)
        throwTimeout(
            fmt::format("{}: topology probe ({}) with rank {} timed out after {} s; is that rank alive "
                        "and also running with HOCCL_TOPO_PROBE=1? (raise HOCCL_TIMEOUT, or set "
                        "HOCCL_TOPO_PROBE=0)",
                        comm_.describe(), what, peer_, timeout.count()));
      switch (backoff.next()) {
        case WaitAction::Spin: Backoff::cpuRelax(); break;
        case WaitAction::Yield: sched_yield(); break;
        case WaitAction::Block: ch_.waitForActivity(backoff.blockMicros()); break;
      }
    }
  }

 private:
  Communicator& comm_;
  int peer_;
  transport::Channel& ch_;
};

// Sender side of one direction; returns MB/s (median of the repetitions).
double sendDirection(Link& link, std::vector<char>& payload) {
  std::vector<double> rates;
  auto used = Clock::duration::zero();
  uint64_t header = 0, ack = 0;
  while (static_cast<int>(rates.size()) < kMaxReps && used < kDirectionBudget) {
    header = kPayloadBytes;
    auto t0 = Clock::now();
    link.send(&header, sizeof(header));
    link.send(payload.data(), kPayloadBytes);
    link.recv(&ack, sizeof(ack));
    link.wait("sending");
    auto dt = Clock::now() - t0;
    used += dt;
    rates.push_back(kPayloadBytes / std::max(1e-9, std::chrono::duration<double>(dt).count()) / 1e6);
  }
  header = 0;
  link.send(&header, sizeof(header));
  link.wait("ending a direction");
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

// Receiver side of one direction.
void receiveDirection(Link& link, std::vector<char>& payload, int peer) {
  for (;;) {
    uint64_t header = 0, ack = 1;
    link.recv(&header, sizeof(header));
    link.wait("waiting for a header");
    if (header == 0) return;
    if (header > payload.size())
      throwInternalError(fmt::format("topology probe: rank {} announced {} bytes, more than the {} expected", peer,
                                     header, payload.size()));
    link.recv(payload.data(), header);
    link.wait("receiving");
    link.send(&ack, sizeof(ack));
    link.wait("acknowledging");
  }
}

// This leader's row: MB/s from its host to every other host (0 for itself).
std::vector<double> measureRow(Communicator& comm, int myHost, const std::vector<int>& leaderOf) {
  const int nhosts = static_cast<int>(leaderOf.size());
  std::vector<double> row(nhosts, 0.0);
  std::vector<char> payload(kPayloadBytes, 0x5a);
  for (int round = 0; round < topo::roundRobinRounds(nhosts); ++round) {
    int other = topo::roundRobinPartner(myHost, round, nhosts);
    if (other < 0) continue;
    comm.connect({leaderOf[other]});  // lazy connections: the partner of this round connects to this rank too
    Link link(comm, leaderOf[other]);
    uint64_t mine = static_cast<uint64_t>(myHost), theirs = 0;
    link.send(&mine, sizeof(mine));
    link.recv(&theirs, sizeof(theirs));
    link.wait("handshake");
    if (theirs != static_cast<uint64_t>(other))
      throwInternalError(fmt::format("topology probe: rank {} says it leads host {}, expected host {}", leaderOf[other],
                                     theirs, other));
    if (myHost < other) {
      row[other] = sendDirection(link, payload);
      receiveDirection(link, payload, leaderOf[other]);
    } else {
      receiveDirection(link, payload, leaderOf[other]);
      row[other] = sendDirection(link, payload);
    }
  }
  return row;
}

}  // namespace

bool topoProbeWanted(const topo::Topology& topo, const std::vector<boot::RankInfo>& ranks) {
  if (params::TOPO_PROBE.get() != 1) return false;
  bool anySwitch = std::any_of(ranks.begin(), ranks.end(), [](const boot::RankInfo& r) { return r.switchId[0] != 0; });
  if (anySwitch) {
    HOCCL_INFO(kTopo, "HOCCL_TOPO_PROBE=1 ignored: ranks reported switch ids (topology file or environment)");
    return false;
  }
  if (topo.nhosts < 3) {
    HOCCL_INFO(kTopo, "HOCCL_TOPO_PROBE=1 ignored: {} host(s), the probe needs at least 3", topo.nhosts);
    return false;
  }
  return true;
}

topo::Topology probeTopology(Communicator& comm) {
  const topo::Topology& topo = comm.topology();
  const int nhosts = topo.nhosts, nranks = comm.nranks();
  std::vector<int> leaderOf(nhosts, -1);
  for (int r = nranks - 1; r >= 0; --r) leaderOf[topo.hostOf[r]] = r;
  const auto t0 = Clock::now();
  std::vector<double> all(static_cast<size_t>(nranks) * nhosts, 0.0);
  const int myHost = topo.hostOf[comm.rank()];
  if (leaderOf[myHost] == comm.rank()) {
    std::vector<double> row = measureRow(comm, myHost, leaderOf);
    std::copy(row.begin(), row.end(), all.begin() + static_cast<size_t>(comm.rank()) * nhosts);
  }
  comm.bootstrap().allGather(all.data(), nhosts * sizeof(double));
  topo::BandwidthMatrix bw(nhosts);
  for (int h = 0; h < nhosts; ++h)
    bw[h].assign(all.begin() + static_cast<size_t>(leaderOf[h]) * nhosts,
                 all.begin() + static_cast<size_t>(leaderOf[h] + 1) * nhosts);
  std::vector<int> group = topo::clusterByBandwidth(bw);

  std::vector<boot::RankInfo> ranks = comm.rankInfo();
  for (auto& r : ranks) {
    std::string id = fmt::format("probe{}", group[topo.hostOf[r.rank]]);
    std::memset(r.switchId, 0, sizeof(r.switchId));
    std::strncpy(r.switchId, id.c_str(), sizeof(r.switchId) - 1);
    r.switchHash = topo::hashId(id);
  }
  topo::Topology result = topo::build(ranks);
  if (comm.rank() == 0) {
    std::string summary;
    for (int s = 0; s < result.nswitches; ++s) {
      summary += fmt::format("{}{}:", s ? "; " : "", result.switchNames[s]);
      for (int h = 0; h < nhosts; ++h)
        if (group[h] == s) summary += fmt::format(" h{}={}", h, result.hostNames[h]);
    }
    HOCCL_INFO(kTopo, "{}: bandwidth probe of {} hosts took {:.0f} ms; measured\n{}", comm.describe(), nhosts,
               std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), topo::formatBandwidthMatrix(bw));
    HOCCL_INFO(kTopo, "{}: bandwidth probe found {} switch(es) (same switch: >= {} x the fastest pair): {}",
               comm.describe(), result.nswitches, topo::kProbeSameSwitchFraction, summary);
  }
  return result;
}

}  // namespace hoccl
