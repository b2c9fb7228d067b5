// The tuning probe of HOCCL_TUNE_PROBE=1 (see tune_probe.h).
//
//   1. Every rank computes the same plan from the topology: for each link class (intra-host, intra-switch,
//      inter-switch) the first rank that is of that class from rank 0. Only rank 0 and those peers take part.
//   2. Per class, rank 0 leads exchanges: an 8-byte header (payload bytes + 1; 0 ends the class), the payload, an
//      8-byte acknowledgement back. Pings without payload give the latency (half the median round trip, the median
//      because a descheduled rank on a busy machine would dominate a mean); payloads of 64 KiB and 512 KiB the
//      bandwidth (the slope between their fastest times, so per-message costs cancel), as `hoccl-model calibrate`
//      does with larger messages. The classes go from the network inwards (inter-switch first). Each kind stops at
//      its repetition cap, its own budget or the probe's deadline (kTotalBudget after the start; at least one
//      exchange each), and a class that would start after the deadline keeps its value (rank 0 only sends the end
//      header): a slow spine or a loaded machine cannot stretch the init by more than one exchange of each kind.
//   3. Rank 0 measures the local copy rate (memcpy of 8 MiB, best of 3).
//   4. The model is all-gathered through the bootstrap and every rank takes rank 0's row: one model everywhere,
//      so every rank's tuner makes the same choice (ranks choosing differently would deadlock).
// The NIC and spine capacities take the measured intra-switch and inter-switch rates (one flow; `hoccl-model
// calibrate` measures them with concurrent flows, which takes longer than an init should). The per-step costs
// (LinkModel::step) are not probed here (they need every rank busy at once; `hoccl-model calibrate` fits them):
// rank 0's values, from HOCCL_MODEL_FILE or 0, are handed to every rank with the rest.
#include "comm/tune_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "comm/communicator.h"
#include "comm/probe_link.h"

namespace hoccl {
namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

constexpr size_t kSmall = size_t{64} << 10, kLarge = size_t{512} << 10;
constexpr int kMaxPings = 100, kMaxTransfers = 5;
constexpr Ms kPingBudget{40}, kTransferBudget{100}, kTotalBudget{500};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Rank 0's side of one class.
class Leader {
 public:
  Leader(Communicator& comm, int peer)
      : link_(comm, peer, "tuning probe", "HOCCL_TUNE_PROBE=0"), payload_(kLarge, 0x3c) {}
  // Round trip of one exchange with `bytes` of payload.
  double exchange(size_t bytes) {
    header_ = bytes + 1;
    const auto t0 = Clock::now();
    link_.send(&header_, sizeof(header_));
    if (bytes) link_.send(payload_.data(), bytes);
    link_.recv(&ack_, sizeof(ack_));
    link_.wait(bytes ? "bandwidth" : "latency");
    return seconds(Clock::now() - t0);
  }
  // Median round trip of up to `reps` exchanges, fewer once `budget` is used or `deadline` has passed (at least
  // one); with `fastest` the shortest instead (the bandwidth slope: descheduling only ever adds time).
  double repeat(size_t bytes, int reps, Clock::duration budget, Clock::time_point deadline, bool fastest = false) {
    std::vector<double> t;
    const auto start = Clock::now();
    while (static_cast<int>(t.size()) < reps &&
           (t.empty() || (Clock::now() - start < budget && Clock::now() < deadline)))
      t.push_back(exchange(bytes));
    return fastest ? *std::min_element(t.begin(), t.end()) : median(t);
  }
  void end() {
    header_ = 0;
    link_.send(&header_, sizeof(header_));
    link_.wait("ending");
  }

 private:
  ProbeLink link_;
  std::vector<char> payload_;
  uint64_t header_ = 0, ack_ = 0;
};

// A probed peer's side: answers until rank 0 ends the class.
void follow(Communicator& comm) {
  ProbeLink link(comm, 0, "tuning probe", "HOCCL_TUNE_PROBE=0");
  std::vector<char> payload(kLarge);
  for (;;) {
    uint64_t header = 0, ack = 1;
    link.recv(&header, sizeof(header));
    link.wait("waiting for rank 0");
    if (header == 0) return;
    if (header - 1 > payload.size())
      throwInternalError(fmt::format("tuning probe: rank 0 announced {} bytes, more than the {} expected", header - 1,
                                     payload.size()));
    if (header > 1) {
      link.recv(payload.data(), header - 1);
      link.wait("receiving");
    }
    link.send(&ack, sizeof(ack));
    link.wait("acknowledging");
  }
}

double memcpyRate() {
  const size_t bytes = size_t{8} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    const double t = seconds(Clock::now() - t0);
    if (b[bytes / 2] != 1) throwInternalError("tuning probe: the memcpy probe did not copy");
    best = std::max(best, static_cast<double>(bytes) / std::max(t, 1e-9));
    b[bytes / 2] = 2;
  }
  return best;
}

// Layout of the agreed row: alpha[4], beta[4], step[4], nic, spine, probe seconds.
constexpr size_t kRow = 3 * hocclNumLinkClasses + 3;
constexpr size_t kStep = 2 * hocclNumLinkClasses, kNic = 3 * hocclNumLinkClasses, kSpine = kNic + 1,
                 kSeconds = kNic + 2;

}  // namespace

bool tuneProbeWanted(const topo::Topology& topo) { return params::TUNE_PROBE.get() == 1 && topo.nranks > 1; }

TuneProbeResult probeLinkModel(Communicator& comm) {
  const topo::Topology& t = comm.topology();
  const int me = comm.rank();
  int peerOf[hocclNumLinkClasses];
  std::fill(std::begin(peerOf), std::end(peerOf), -1);
  for (int r = t.nranks - 1; r > 0; --r) peerOf[t.linkClass(0, r)] = r;  // the first rank of each class
  topo::LinkModel m = topo::LinkModel::fromParams();
  std::string summary;
  std::vector<double> all(kRow * static_cast<size_t>(comm.nranks()), 0.0);
  const auto start = Clock::now(), deadline = start + kTotalBudget;
  // The network classes first: they weigh most in the tuner's choices, and the first class is always measured.
  for (int c = hocclNumLinkClasses - 1; c >= hocclLinkIntraHost; --c) {
    const int peer = peerOf[c];
    if (peer < 0 || (me != 0 && me != peer)) continue;
    comm.connect({me == 0 ? peer : 0});  // lazy connections: both ends ask
    if (me == peer) {
      follow(comm);
      continue;
    }
    Leader lead(comm, peer);
    const char* name = topo::linkClassName(static_cast<hocclLinkClass_t>(c));
    if (!summary.empty() && Clock::now() > deadline) {
      summary += fmt::format(" {}: skipped (time budget used);", name);
      lead.end();
      continue;
    }
    lead.exchange(0);  // warm-up (first use of the channel)
    const double lat = lead.repeat(0, kMaxPings, kPingBudget, deadline) / 2;
    const double ts = lead.repeat(kSmall, kMaxTransfers, kTransferBudget, deadline, true);
    const double tl = lead.repeat(kLarge, kMaxTransfers, kTransferBudget, deadline, true);
    lead.end();
    const double bw = tl > ts ? static_cast<double>(kLarge - kSmall) / (tl - ts) : static_cast<double>(kLarge) / tl;
    m.alpha[c] = lat;
    m.beta[c] = bw;
    summary += fmt::format(" {} (rank 0 <-> {}) {:.2f} us {:.3f} GB/s;", name, peer, lat * 1e6, bw / 1e9);
  }
  if (me == 0) {
    m.beta[hocclLinkSelf] = memcpyRate();
    summary += fmt::format(" self memcpy {:.2f} GB/s", m.beta[hocclLinkSelf] / 1e9);
    if (peerOf[hocclLinkIntraSwitch] >= 0) m.nic = m.beta[hocclLinkIntraSwitch];
    if (peerOf[hocclLinkInterSwitch] >= 0) m.spine = m.beta[hocclLinkInterSwitch];
    // Values set explicitly with HOCCL_LINK_* win, as they do over a model file (topology/link_model.h).
    const topo::LinkModel given = topo::LinkModel::fromParams();
    static const params::IntParam* const kBw[] = {&params::LINK_BW_SELF, &params::LINK_BW_INTRA_HOST,
                                                  &params::LINK_BW_INTRA_SWITCH, &params::LINK_BW_INTER_SWITCH};
    static const params::IntParam* const kLat[] = {&params::LINK_LAT_SELF, &params::LINK_LAT_INTRA_HOST,
                                                   &params::LINK_LAT_INTRA_SWITCH, &params::LINK_LAT_INTER_SWITCH};
    for (int c = 0; c < hocclNumLinkClasses; ++c) {
      if (kBw[c]->isSet()) m.beta[c] = given.beta[c];
      if (kLat[c]->isSet()) m.alpha[c] = given.alpha[c];
    }
    if (params::LINK_BW_INTRA_SWITCH.isSet()) m.nic = given.nic;
    if (params::LINK_BW_INTER_SWITCH.isSet()) m.spine = given.spine;
    double* row = all.data();
    for (int c = 0; c < hocclNumLinkClasses; ++c)
      row[c] = m.alpha[c], row[hocclNumLinkClasses + c] = m.beta[c], row[kStep + c] = m.step[c];
    row[kNic] = m.nic;
    row[kSpine] = m.spine;
    row[kSeconds] = seconds(Clock::now() - start);
  }
  comm.bootstrap().allGather(all.data(), kRow * sizeof(double));
  TuneProbeResult res;
  const double* row = all.data();  // rank 0's
  for (int c = 0; c < hocclNumLinkClasses; ++c) {
    res.model.alpha[c] = row[c];
    res.model.beta[c] = row[hocclNumLinkClasses + c];
    res.model.step[c] = row[kStep + c];
    if (!(res.model.alpha[c] > 0) || !(res.model.beta[c] > 0))
      throwInternalError(fmt::format("tuning probe: rank 0 sent a non-positive value for {}",
                                     topo::linkClassName(static_cast<hocclLinkClass_t>(c))));
  }
  res.model.nic = row[kNic];
  res.model.spine = row[kSpine];
  res.seconds = row[kSeconds];
  res.summary = me == 0 ? summary : "measured by rank 0";
  return res;
}

}  // namespace hoccl
