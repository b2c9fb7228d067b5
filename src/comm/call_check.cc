/*
 * The mismatch check (see call_check.h). Two exchanges (HOCCL_CHECK_EXCHANGE); both run inline before an ungrouped
 * shortcut call (checkCall) or as an executor task right before the call's own task (checkTask: schedules and grouped
 * calls, where the executor's deadline, health checks and the progress of other communicators of the group apply),
 * and progress the channels under the waiting policy of base/wait.h, HOCCL_TIMEOUT, the communicator's health and
 * the channels' own detection of dead peers. The bytes are not counted in the communicator's byte counters (they are
 * control traffic, not the call's payload).
 *
 * doubling (the default): rounds k = 0 .. ceil(log2 n) - 1. In round k rank r sends its CheckSummary to rank r + 2^k
 * and receives one from rank r - 2^k (mod n), and combines the two. Before round k, r's summary covers the ranks
 * r - 2^k + 1 .. r; the one it receives covers r - 2^(k+1) + 1 .. r - 2^k; so afterwards r's covers 2^(k+1) ranks,
 * and after the last round all n (wrapping round: when n is not a power of two some ranks are covered twice, which
 * the summary allows, see combine()). A summary holds the lowest rank of its set with its fingerprint and the lowest
 * rank whose fingerprint differs from that one; so every rank ends with the same pair: rank 0's call and the lowest
 * rank whose call differs (none: every rank made the same call). Every rank then fails, or goes on, together, with the
 * same message, after exactly the same sends and receives: the channels stay in step and no payload moved.
 *
 * Why not only the two ring neighbours (one round): agreement of every adjacent pair does imply agreement of all, but
 * a rank that agrees with its two neighbours does not know whether the other pairs agree. It would start the call
 * while elsewhere a pair differs, and its algorithm may move data with a far rank that made another call (a tree, a
 * scatter from the root, recursive doubling, a one-host shortcut that reads every peer's buffer): the very thing the
 * check exists to prevent. Knowing that every pair agrees is itself an all-reduce over the ranks, which needs
 * log2 n rounds; so the rounds compare the calls directly, and every rank fails with hocclInvalidUsage at once
 * rather than some ranks through the bootstrap's verdict after the root's settling time.
 *
 * Lazy connections (HOCCL_CONNECT=lazy): doubling connects the peers r +- 2^k, 2 * ceil(log2 n) at most and once per
 * communicator: 20 at 1,024 ranks, against 2 for the ring below and n - 1 for eager connections. Under
 * HOCCL_MAX_CONNS they would be closed and connected again on every check, so there `auto` takes `all`'s ring.
 * The check's peers depend only on the communicator, never on the call, so ranks whose calls differ still meet in
 * the check: the executor connects a call's own peers only once its check has passed (exec::Task::gate). Were they
 * connected first, a rank whose call reaches a far rank (all-to-all) would wait for that rank to connect, which it
 * never does when its own call (a ring) does not need it, and the mismatch would end in HOCCL_TIMEOUT.
 *
 * all: every rank posts its fingerprint to every peer and a receive of 64 bytes from every peer, so every rank has
 * all of them and lists every rank's call on a difference. With lazy connections the fingerprints go round a ring
 * instead (rank r sends to r+1 and receives from r-1, n-1 steps, each forwarding the fingerprint received in the step
 * before), so that the check connects only the two ring neighbours.
 *
 * A silent rank stalls its successors directly and the others through the chain; the root's verdict names it.
 *
 * Cost: one 136-byte message per round (doubling: ceil(log2 n) rounds), or 64 bytes with each of n-1 peers in one
 * round (all, eager) or n-1 ring steps (all, lazy), at the channels' small-message latency. Measured in
 * docs/performance.md ("Mismatch check and flight recorder"), which is also where kCheckMinBytes comes from.
 */
#include "comm/call_check.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"
#include "comm/group.h"
#include "comm/plan.h"

namespace hoccl {
namespace {

using Clock = std::chrono::steady_clock;

bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

// The state of one check: this rank's fingerprint, everybody's, and the channels it swaps them over.
struct CheckState {
  Communicator* comm = nullptr;
  CallFingerprint mine;
  std::vector<CallFingerprint> all;  // one per rank (all[rank] = mine)
  std::vector<transport::Channel*> channels;
  bool posted = false;
  bool ring = false;  // all, lazy connections: n-1 steps round the ring (channels = {next, previous})
  int step = 0;       // ring: the step posted last
  // doubling: one summary sent and one received per round; each receive lands through a sink that counts its bytes.
  bool doubling = false;
  int round = 0;  // the round posted last
  CheckSummary summary;
  std::vector<CheckSummary> sent, got;
  std::vector<size_t> arrived;
  std::vector<transport::Channel*> sendTo, recvFrom;  // per round
};

enum class Exchange { Doubling, All };

// HOCCL_CHECK_EXCHANGE for this call (read per call: a process may hold communicators made under different settings).
Exchange exchangeOf(const Communicator& comm) {
  const std::string v = params::CHECK_EXCHANGE.get();
  if (v == "doubling") return Exchange::Doubling;
  if (v == "all") return Exchange::All;
  if (v != "auto") throwInvalidArgument(fmt::format("HOCCL_CHECK_EXCHANGE={}: expected auto, doubling or all", v));
  // With lazy connections the doubling rounds' peers are connections held for the check alone: under a connection
  // limit they would be closed and connected again on every check, and above kDoublingMaxLazyRanks ranks they cost
  // more than the check saves (2 ceil(log2 n) - 2 extra descriptors per rank and, over shm, one ring pair of
  // HOCCL_SHM_SLOTS x HOCCL_SHM_SLOT_SIZE per peer: 97 against 25 MB per rank at 64 ranks), while the ring's extra
  // latency is paid only by the checked calls (the first 16, and those of 1 MiB and more). At 8 ranks over tcp the
  // doubling peers alone took the descriptors per rank from ~10 to 16.5 (tools/bench/scale); at 4 they add one peer.
  constexpr int kDoublingMaxLazyRanks = 4;
  const bool lazyLimited = params::MAX_CONNS.get() > 0 || comm.nranks() > kDoublingMaxLazyRanks;
  return comm.lazy() && lazyLimited ? Exchange::All : Exchange::Doubling;
}

// The doubling rounds: round k sends to (r + 2^k) mod n and receives from (r - 2^k) mod n, for 2^k < n.
int roundsFor(int n) {
  int k = 0;
  while ((int64_t{1} << k) < n) ++k;
  return k;
}
int sendPeer(int r, int n, int k) { return static_cast<int>((r + (int64_t{1} << k)) % n); }
int recvPeer(int r, int n, int k) { return static_cast<int>(((r - (int64_t{1} << k)) % n + n) % n); }

CallFingerprint fingerprintOf(const std::vector<const Op*>& colls) {
  CallFingerprint f;
  const Op& first = *colls.front();
  f.seq = first.seq;
  f.count = first.count;
  f.ncoll = static_cast<uint32_t>(colls.size());
  f.root = isRooted(first.coll) ? first.root : -1;
  f.coll = static_cast<uint8_t>(first.coll);
  f.dtype = static_cast<uint8_t>(first.dtype);
  f.op = reduces(first.coll) ? static_cast<uint8_t>(std::min<int>(first.op, 0xfe)) : 0xff;
  f.device = first.onDevice() ? 1 : 0;  // a rank staging device buffers and one moving host buffers cannot pair up
  // Calls of a parent and a child that share connections (splitShare) can meet on one channel: they must differ.
  const uint64_t tag = first.comm->bootstrap().commTag();
  for (int i = 0; i < 3; ++i) f.comm[i] = static_cast<uint8_t>(tag >> (8 * i));
  const char* name = resolve(first).decision->choice.name();
  std::strncpy(f.algorithm, name, sizeof(f.algorithm) - 1);
  uint64_t h = kFnv1aBasis;
  for (const Op* op : colls) {
    const int64_t fields[] = {static_cast<int64_t>(op->seq),   static_cast<int64_t>(op->coll),
                              static_cast<int64_t>(op->count), static_cast<int64_t>(op->dtype),
                              reduces(op->coll) ? op->op : -1, isRooted(op->coll) ? op->root : -1};
    h = fnv1a(fields, sizeof(fields), h);
  }
  f.groupHash = h;
  return f;
}

bool same(const CallFingerprint& a, const CallFingerprint& b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

std::string joinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// The end of every mismatch message: what the check did and what to do.
constexpr const char* kMismatchAdvice =
    "The mismatch check (HOCCL_CHECK_MISMATCH) compared the calls before any data moved, so no buffer was touched. "
    "Every rank must issue the same collectives in the same order with the same count, type, op, root and kind of "
    "buffers";

// When the differing calls were made on different communicators (which share their connections: splitShare).
std::string commsNote(const std::vector<CallFingerprint>& calls) {
  for (const CallFingerprint& f : calls)
    if (std::memcmp(f.comm, calls.front().comm, sizeof(f.comm)) != 0)
      return ". The calls were made on different communicators that share connections (a split with splitShare): "
             "every rank must make its calls on a parent and its sharing children in the same order";
  return "";
}

std::string kindsNote(const std::vector<int>& onDevice, const std::vector<int>& onHost) {
  if (onDevice.empty() || onHost.empty()) return "";
  return fmt::format(
      ". {} {} passed device buffers and {} {} host buffers: when one rank of a call passes device buffers every rank "
      "must (as in NCCL)",
      onDevice.size() == 1 ? "Rank" : "Ranks", joinRanks(onDevice), onHost.size() == 1 ? "rank" : "ranks",
      joinRanks(onHost));
}

// doubling: every rank's summary names rank 0's call and the lowest rank whose call differs.
[[noreturn]] void throwSummaryDifference(const CheckState& c) {
  const CheckSummary& s = c.summary;
  std::vector<int> onDevice, onHost;
  (s.low.device ? onDevice : onHost).push_back(s.lowRank);
  (s.other.device ? onDevice : onHost).push_back(s.otherRank);
  throw Error(hocclInvalidUsage,
              fmt::format("{}: the ranks called different operations (rank {}: {}; rank {}: {}; rank {} is the "
                          "lowest-numbered rank whose call differs from rank {}'s, and others may differ too: "
                          "HOCCL_CHECK_EXCHANGE=all lists every rank's call){}{}. {}",
                          c.comm->describe(), s.lowRank, describeFingerprint(s.low), s.otherRank,
                          describeFingerprint(s.other), s.otherRank, s.lowRank, kindsNote(onDevice, onHost),
                          commsNote({s.low, s.other}), kMismatchAdvice));
}

[[noreturn]] void throwDifference(const CheckState& c) {
  std::vector<std::pair<CallFingerprint, std::vector<int>>> groups;  // distinct fingerprints, in rank order
  for (int r = 0; r < static_cast<int>(c.all.size()); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return same(g.first, c.all[r]); });
    if (it == groups.end()) groups.push_back({c.all[r], {r}});
    else it->second.push_back(r);
  }
  std::string list;
  for (const auto& [f, ranks] : groups)
    list += fmt::format("{}{} {}: {}", list.empty() ? "" : "; ", ranks.size() == 1 ? "rank" : "ranks", joinRanks(ranks),
                        describeFingerprint(f));
  std::vector<int> onDevice, onHost;
  for (int r = 0; r < static_cast<int>(c.all.size()); ++r) (c.all[r].device ? onDevice : onHost).push_back(r);
  throw Error(hocclInvalidUsage,
              fmt::format("{}: the ranks called different operations ({}){}{}. {}", c.comm->describe(), list,
                          kindsNote(onDevice, onHost), commsNote(c.all), kMismatchAdvice));
}

// doubling, round k = c.round: sends this rank's summary so far, receives the one of the ranks before.
void postRound(CheckState& c) {
  const size_t k = static_cast<size_t>(c.round);
  c.sent[k] = c.summary;
  c.sendTo[k]->postSend(&c.sent[k], sizeof(CheckSummary));
  transport::RecvTarget target;
  target.sink = [&c, k](const void* data, size_t offset, size_t len) {
    std::memcpy(reinterpret_cast<char*>(&c.got[k]) + offset, data, len);
    c.arrived[k] += len;
  };
  c.recvFrom[k]->postRecv(sizeof(CheckSummary), std::move(target));
}

void postDoubling(CheckState& c) {
  Communicator& comm = *c.comm;
  const int n = comm.nranks(), r = comm.rank(), rounds = roundsFor(n);
  if (comm.lazy()) {
    try {
      comm.connect(doublingCheckPeers(r, n));
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: the mismatch check of {} failed: {}", comm.describe(),
                                        describeFingerprint(c.mine), e.what()));
    }
  }
  c.doubling = true;
  c.summary = summaryOf(r, c.mine);
  c.sent.assign(static_cast<size_t>(rounds), CheckSummary{});
  c.got.assign(static_cast<size_t>(rounds), CheckSummary{});
  c.arrived.assign(static_cast<size_t>(rounds), 0);
  for (int k = 0; k < rounds; ++k) {
    c.sendTo.push_back(&comm.channel(sendPeer(r, n, k)));
    c.recvFrom.push_back(&comm.channel(recvPeer(r, n, k)));
    for (transport::Channel* ch : {c.sendTo.back(), c.recvFrom.back()})
      if (std::find(c.channels.begin(), c.channels.end(), ch) == c.channels.end()) c.channels.push_back(ch);
  }
  c.round = 0;
  postRound(c);
}

// Ring step k: send the fingerprint of rank r-k to the next rank, receive that of rank r-k-1 from the previous one.
void postRingStep(CheckState& c) {
  const int n = c.comm->nranks(), r = c.comm->rank();
  c.channels[0]->postSend(&c.all[static_cast<size_t>((r - c.step + n) % n)], sizeof(CallFingerprint));
  transport::RecvTarget target;
  target.direct = &c.all[static_cast<size_t>((r - c.step - 1 + 2 * n) % n)];
  c.channels[1]->postRecv(sizeof(CallFingerprint), std::move(target));
}

void post(CheckState& c, const Op& op) {
  Communicator& comm = *op.comm;
  c.comm = &comm;
  c.mine = fingerprintOf({&op});
  if (exchangeOf(comm) == Exchange::Doubling) {
    postDoubling(c);
    c.posted = true;
    return;
  }
  c.all.assign(static_cast<size_t>(comm.nranks()), CallFingerprint{});
  c.all[static_cast<size_t>(comm.rank())] = c.mine;
  if (comm.lazy()) {
    const int n = comm.nranks(), next = (comm.rank() + 1) % n, prev = (comm.rank() + n - 1) % n;
    try {
      comm.connect({next, prev});
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: the mismatch check of {} failed: {}", comm.describe(),
                                        describeFingerprint(c.mine), e.what()));
    }
    c.ring = true;
    c.step = 0;
    c.channels = {&comm.channel(next), &comm.channel(prev)};
    postRingStep(c);
    c.posted = true;
    return;
  }
  for (int p = 0; p < comm.nranks(); ++p) {
    if (p == comm.rank()) continue;
    transport::Channel& ch = comm.channel(p);
    ch.postSend(&c.mine, sizeof(CallFingerprint));
    transport::RecvTarget target;
    target.direct = &c.all[static_cast<size_t>(p)];
    ch.postRecv(sizeof(CallFingerprint), std::move(target));
    c.channels.push_back(&ch);
  }
  c.posted = true;
}

// Moves the swap forward without waiting; true (after comparing) once every fingerprint is here.
bool progress(CheckState& c, bool& moved) {
  bool pending = false;
  for (transport::Channel* ch : c.channels) {
    try {
      moved |= ch->progress();
    } catch (const Error& e) {
      // A peer's data met the fingerprint's receive: it runs another call, so the channels are out of step and the
      // communicator is broken (the channel's mismatch says so); its verdict then releases that peer too.
      throw Error(e.code(),
                  fmt::format("{}: the mismatch check of {} failed: {}", c.comm->describe(),
                              describeFingerprint(c.mine), e.what()),
                  e.isMismatch());
    }
    pending |= ch->pending() > 0;
  }
  if (c.doubling) {
    const int rounds = static_cast<int>(c.got.size());
    while (c.round < rounds && c.arrived[static_cast<size_t>(c.round)] == sizeof(CheckSummary)) {
      c.summary = combine(c.summary, c.got[static_cast<size_t>(c.round)]);
      if (++c.round < rounds) postRound(c);
      moved = pending = true;
    }
    if (pending) return false;
    if (c.summary.otherRank >= 0) throwSummaryDifference(c);
    return true;
  }
  if (pending) return false;
  if (c.ring && c.step + 2 < c.comm->nranks()) {  // steps 0 .. n-2
    ++c.step;
    postRingStep(c);
    moved = true;
    return false;
  }
  for (const CallFingerprint& f : c.all)
    if (!same(f, c.mine)) throwDifference(c);
  return true;
}

std::string pendingPeers(const CheckState& c) {
  std::string peers;
  for (transport::Channel* ch : c.channels) {
    if (ch->pending() == 0) continue;
    const auto& info = c.comm->rankInfo()[ch->peer()];
    peers += fmt::format("{}rank {} (host {}, pid {}, via {})", peers.empty() ? "" : ", ", ch->peer(), info.hostname,
                         info.pid, c.comm->transportName(ch->peer()));
  }
  return peers.empty() ? std::string("nobody") : peers;
}

int checkMode() {
  static const int mode = static_cast<int>(params::CHECK_MISMATCH.get());
  return mode;
}

}  // namespace

std::vector<int> doublingCheckPeers(int rank, int nranks) {
  std::vector<int> peers;
  for (int k = 0; k < roundsFor(nranks); ++k)
    for (int p : {sendPeer(rank, nranks, k), recvPeer(rank, nranks, k)})
      if (std::find(peers.begin(), peers.end(), p) == peers.end()) peers.push_back(p);
  return peers;
}

CheckSummary summaryOf(int rank, const CallFingerprint& f) {
  CheckSummary s;
  s.low = f;
  s.lowRank = rank;
  return s;
}

CheckSummary combine(const CheckSummary& a, const CheckSummary& b) {
  if (a.lowRank < 0) return b;
  if (b.lowRank < 0) return a;
  const bool aLow = a.lowRank <= b.lowRank;
  const CheckSummary& lo = aLow ? a : b;
  const CheckSummary& hi = aLow ? b : a;
  CheckSummary out = lo;
  // The lowest rank of hi's set whose call differs from lo's low: hi's lowest rank itself when its call differs (no
  // rank of hi's set is lower), else the lowest rank that differs from hi's lowest (and so from lo's low).
  int candidate = hi.otherRank;
  const CallFingerprint* candidateCall = &hi.other;
  if (!same(hi.low, lo.low)) {
    candidate = hi.lowRank;
    candidateCall = &hi.low;
  }
  if (candidate >= 0 && (out.otherRank < 0 || candidate < out.otherRank)) {
    out.otherRank = candidate;
    out.other = *candidateCall;
  }
  return out;
}

std::string describeFingerprint(const CallFingerprint& f) {
  transport::CollCall c;
  c.coll = static_cast<Coll>(f.coll);
  c.count = f.count;
  c.dtype = static_cast<hocclDataType_t>(f.dtype);
  c.op = static_cast<hocclRedOp_t>(f.op);
  c.root = f.root;
  std::string algo(f.algorithm, strnlen(f.algorithm, sizeof(f.algorithm)));
  std::string s = fmt::format("call #{} {} [{}]", f.seq, transport::describeCall(c), algo);
  if (f.device) s += " on device buffers";
  if (f.ncoll > 1) s += fmt::format(" and {} more collective(s) in a group", f.ncoll - 1);
  return s;
}

bool mismatchCheckWanted(int mode, uint64_t seq, size_t bytes) {
  if (mode <= 0) return false;
  if (mode >= 2) return true;
  return seq < kCheckFirstCalls || bytes >= kCheckMinBytes;
}

bool checkWanted(const Op& op) {
  const int mode = checkMode();
  if (mode == 0 || op.kind != Op::Kind::Collective || op.comm->nranks() <= 1) return false;
  return mismatchCheckWanted(mode, op.seq, largestBufferBytes(op));
}

void checkCall(const Op& op) {
  Communicator& comm = *op.comm;
  InFlightGuard inFlight(comm);  // lets hocclCommAbort (another thread) wait until the check has left
  static const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
  CheckState c;
  post(c, op);
  Backoff backoff(comm.waitPolicy());
  Clock::time_point lastProgress = Clock::now();
  Health& health = comm.health();
  while (true) {
    if (health.aborted() || health.failed())
      health.check(comm.describe(), "the mismatch check of " + describeFingerprint(c.mine));
    bool moved = false;
    if (progress(c, moved)) return;
    if (moved) {
      backoff.reset();
      lastProgress = Clock::now();
      continue;
    }
    const WaitAction action = backoff.next();
    if (action == WaitAction::Spin) Backoff::cpuRelax();
    else if (action == WaitAction::Yield) sched_yield();
    else {
      for (transport::Channel* ch : c.channels)
        if (ch->pending()) {
          ch->waitForActivity(backoff.blockMicros());
          break;
        }
    }
    if ((backoff.idle() & 63) == 0 && Clock::now() - lastProgress > timeout) {
      std::string why = silentPeerMessage(comm.describe(), "the mismatch check of " + describeFingerprint(c.mine),
                                          timeout.count(), pendingPeers(c));
      if (checkMode() == 1 && op.seq >= kCheckFirstCalls)  // the peer may be in a smaller call it does not check
        why += fmt::format(
            " With HOCCL_CHECK_MISMATCH=1 a rank checks a call past the first {} only from {} bytes on: a peer whose "
            "call is smaller does not take part, so the calls probably differ; HOCCL_CHECK_MISMATCH=2 (every call) "
            "names both calls",
            kCheckFirstCalls, kCheckMinBytes);
      throw Error(hocclTimeout, why);
    }
  }
}

exec::Task checkTask(const Op& op) {
  exec::Task t;
  t.comm = op.comm;
  t.gate = true;          // the call's own peers are connected once every rank agreed on the call
  if (op.comm->lazy()) {  // connected by the executor before the check; the call's own peers only after it (gate)
    const int n = op.comm->nranks(), r = op.comm->rank();
    if (exchangeOf(*op.comm) == Exchange::Doubling) t.peers = doublingCheckPeers(r, n);
    else t.peers = {(r + 1) % n, (r + n - 1) % n};  // the ring
  }
  auto state = std::make_shared<CheckState>();
  t.poll = [state, opp = &op] {  // the op outlives the run
    if (!state->posted) post(*state, *opp);
    bool moved = false;
    return progress(*state, moved);
  };
  t.waitingFor = [state] { return state->posted ? pendingPeers(*state) : std::string("nobody"); };
  t.what = [state, opp = &op] {
    return "the mismatch check of " + (state->posted ? describeFingerprint(state->mine) : describeOp(*opp));
  };
  return t;
}

}  // namespace hoccl
