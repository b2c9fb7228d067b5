/*
 * The mismatch check (see call_check.h). For one call, every rank posts its 64-byte fingerprint to every peer and
 * a receive of 64 bytes from every peer on the channels the collectives use, then progresses them under the waiting
 * policy of base/wait.h: inline before an ungrouped shortcut call (checkCall), or as an executor task right before
 * the call's own task (checkTask: schedules and grouped calls, where the executor's deadline, health checks and the
 * progress of other communicators of the group apply). Either way: HOCCL_TIMEOUT, the communicator's health, the
 * channels' own detection of dead peers. All fingerprints then lie on every rank, so every rank finds the same
 * difference and fails with the same list of calls; nothing else was sent, so the channels stay in step. The
 * bytes are not counted in the communicator's byte counters (they are control traffic, not the call's payload).
 *
 * With lazy connections (HOCCL_CONNECT=lazy) the fingerprints go round a ring instead (rank r sends to r+1 and
 * receives from r-1, n-1 steps, each forwarding the fingerprint received in the step before), so that the check
 * connects only the two ring neighbours rather than every peer; every rank still ends with every fingerprint. A
 * silent rank stalls its successor directly and the others through the chain; the root's verdict names it.
 *
 * Cost: one round of 64-byte messages with each peer (the channels' small-message latency); measured against the
 * calls in docs/performance.md ("Mismatch check and flight recorder"), which is where kCheckMinBytes comes from.
 */
#include "comm/call_check.h"

#include <sched.h>

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

transport::CollCall callOf(const Op& op) {
  transport::CollCall c;
  c.coll = op.coll;
  c.count = op.count;
  c.dtype = op.dtype;
  c.op = op.op;
  c.root = op.root;
  return c;
}

// Largest buffer of the collective on this communicator, in bytes.
size_t payloadBytes(const Op& op) {
  const transport::CollCall c = callOf(op);
  const int n = op.comm->nranks();
  return std::max(transport::inputBytes(c, n), transport::outputBytes(c, n));
}

// The state of one check: this rank's fingerprint, everybody's, and the channels it swaps them over.
struct CheckState {
  Communicator* comm = nullptr;
  CallFingerprint mine;
  std::vector<CallFingerprint> all;  // one per rank (all[rank] = mine)
  std::vector<transport::Channel*> channels;
  bool posted = false;
  bool ring = false;  // lazy connections: n-1 steps round the ring (channels = {next, previous})
  int step = 0;       // ring: the step posted last
};

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
  std::string kinds;
  if (!onDevice.empty() && !onHost.empty())
    kinds = fmt::format(
        ". {} {} passed device buffers and {} {} host buffers: when one rank of a call passes device "
        "buffers every rank must (as in NCCL)",
        onDevice.size() == 1 ? "Rank" : "Ranks", joinRanks(onDevice), onHost.size() == 1 ? "rank" : "ranks",
        joinRanks(onHost));
  throw Error(hocclInvalidUsage,
              fmt::format("{}: the ranks called different operations ({}){}. The mismatch check (HOCCL_CHECK_MISMATCH) "
                          "compared the calls before any data moved, so no buffer was touched. Every rank must issue "
                          "the same collectives in the same order with the same count, type, op, root and kind of "
                          "buffers",
                          c.comm->describe(), list, kinds));
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
                  e.breaksCommunicator());
    }
    pending |= ch->pending() > 0;
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
  return mode != 0 && op.kind == Op::Kind::Collective && op.comm->nranks() > 1 &&
         mismatchCheckWanted(mode, op.seq, payloadBytes(op));
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
  if (op.comm->lazy()) {  // the ring neighbours, connected by the executor with the other tasks' peers (a group)
    const int n = op.comm->nranks(), r = op.comm->rank();
    t.peers = {(r + 1) % n, (r + n - 1) % n};
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
