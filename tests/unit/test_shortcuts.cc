// Direct tests of the shm collective shortcuts (transports/shm: the arena round of shm_session, the small one-shot
// collectives of shm_small, single copy of shm_single_copy) over real arenas between real threads and forked
// processes, connected by a real bootstrap:
//  - the arena round protocol: sequence numbers and slot reuse with ranks that wait for nobody (a broadcast root,
//    reduce contributors) running far ahead of a slow rank, checked poll by poll against a model of the protocol of
//    shm_session.h (who may publish, who is done, whom missing() names), then under real concurrency;
//  - every collective of both shortcuts against double-precision references of random data, in and out of place,
//    with guard bytes around every buffer;
//  - single copy started for registered buffers only (the tuner's conditional choice) on ordinary buffers: every
//    rank declines after the address round, no byte written;
//  - a peer that never arrives (timeout naming it), a dead peer, an abort;
//  - the call board: a peer that noted the same collective on device buffers (or with another count) and never
//    publishes fails the wait at once naming both calls; the same call, or a note of another collective, does not;
//  - mismatched calls (every waiting rank fails naming both calls, no byte written), and single copy's range check
//    against a peer that publishes a short buffer (forged: impossible through the public path, see that test);
//  - ncclGroupSimulateEnd's price (hoccl::groupSimulatedSeconds) equals the prediction of the shortcut that runs.
// Ranks of the single-thread tests are connected by threads, then driven from the test's thread one poll at a time
// (a shortcut op never blocks), which makes every interleaving deterministic.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rank_runner.h"
#include "../mp/data.h"
#include "algo/predict.h"
#include "algo/tuner.h"
#include "base/boot/bootstrap.h"
#include "base/error.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "comm/plan.h"
#include "kernels/cpu/reduce.h"
#include "topology/link_model.h"
#include "topology/topology.h"
#include "transports/shm/shm_peer_maps.h"
#include "transports/shm/shm_session.h"
#include "transports/shm/shm_single_copy.h"
#include "transports/shm/shm_small.h"

using namespace hoccl;
using hoccl::test::firstError;
using hoccl::test::runProcesses;
using hoccl::test::runThreads;
using namespace hoccl::transport;
using hoccl::test::makeInput;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kTimeoutSeconds = 3;

// HOCCL_TIMEOUT is read once, by the first wait that checks it (a function-local static of shm_session.cc), so it
// is set before main. The tuner's and the shortcuts' parameters are left at their defaults.
const bool kEnvironmentSet = [] {
  setenv("HOCCL_TIMEOUT", std::to_string(kTimeoutSeconds).c_str(), 1);
  for (const char* v : {"HOCCL_ALGO", "HOCCL_SMALL_MAX_BYTES", "HOCCL_CMA_MIN_BYTES", "HOCCL_SHM_DISABLE"}) unsetenv(v);
  return true;
}();

constexpr uint64_t S = shm::kArenaSlots;
constexpr size_t kArenaBytes = 64 << 10;

// ------------------------------------------------------------------------------------------------------------------
// Ranks

/// One rank: bootstrap, arena session and both shm shortcuts, built the way ShmTransport::shortcuts builds them
/// (but keeping the session, so that a test can also run arena rounds of its own).
struct Rank {
  int rank = 0;
  int nranks = 0;
  Health health;
  std::unique_ptr<boot::Bootstrap> boot;
  ConnectContext connect;
  topo::Topology topology;
  topo::ByteCounters counters;
  std::shared_ptr<shm::ArenaSession> session;
  std::unique_ptr<Shortcut> small;
  std::unique_ptr<Shortcut> copy;  // null when the ranks may not read each other's memory
};

std::unique_ptr<Rank> connectRank(const boot::UniqueId& id, int rank, int nranks) {
  auto st = std::make_unique<Rank>();
  st->rank = rank;
  st->nranks = nranks;
  boot::RankInfo self;
  self.rank = rank;
  self.pid = getpid();
  self.hostHash = 0x7e57;
  std::snprintf(self.hostname, sizeof(self.hostname), "testhost");
  std::snprintf(self.hostId, sizeof(self.hostId), "testhost");
  st->boot = std::make_unique<boot::Bootstrap>(id, rank, nranks, self, &st->health);
  st->connect.bootstrap = st->boot.get();
  st->connect.rank = rank;
  st->connect.nranks = nranks;
  st->connect.peers = st->boot->ranks();
  st->connect.jobTag = fmt::format("{:016x}-{}", st->boot->commTag(), st->connect.peers[0].pid);
  st->topology = topo::build(st->connect.peers);
  ShortcutContext sc;
  sc.connect = &st->connect;
  sc.topology = &st->topology;
  sc.counters = &st->counters;
  sc.health = &st->health;
  sc.who = fmt::format("test rank {}/{}", rank, nranks);
  st->session = std::make_shared<shm::ArenaSession>(shm::Arena::connect(st->connect, kArenaBytes, true), sc);
  st->small = std::make_unique<shm::SmallShortcut>(st->session);
  if (st->session->arena().crossMemory()) st->copy = std::make_unique<shm::SingleCopyShortcut>(st->session);
  return st;
}

/// n ranks of this process, connected by threads (to be driven from one thread or many).
std::vector<std::unique_ptr<Rank>> connectThreads(int n) {
  const boot::UniqueId id = boot::createUniqueId();
  std::vector<std::unique_ptr<Rank>> ranks(n);
  auto errors = runThreads(n, [&](int r) { ranks[r] = connectRank(id, r, n); });
  INFO(firstError(errors));
  REQUIRE(firstError(errors).empty());
  return ranks;
}

// ------------------------------------------------------------------------------------------------------------------
// Buffers and references

constexpr size_t kGuard = 192;
constexpr unsigned char kCanary = 0xA5;

/// A buffer with canary bytes on both sides (and inside until written).
struct Buffer {
  std::vector<unsigned char> raw;
  size_t bytes = 0;
  explicit Buffer(size_t n = 0) : raw(n + 2 * kGuard, kCanary), bytes(n) {}
  unsigned char* data() { return raw.data() + kGuard; }
  const unsigned char* data() const { return raw.data() + kGuard; }
  /// The bytes outside [data, data + bytes) still hold the canary.
  bool guardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (raw[i] != kCanary || raw[kGuard + bytes + i] != kCanary) return false;
    return true;
  }
  /// Every byte, inside and out, still holds the canary.
  bool untouched() const {
    return std::all_of(raw.begin(), raw.end(), [](unsigned char c) { return c == kCanary; });
  }
};

size_t elemSize(hocclDataType_t dt) { return kernels::typeSize(dt); }
bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }
size_t inCount(const CollCall& c, int n) {
  return c.coll == Coll::ReduceScatter || c.coll == Coll::AlltoAll ? c.count * n : c.count;
}
size_t outCount(const CollCall& c, int n) {
  return c.coll == Coll::AllGather || c.coll == Coll::AlltoAll ? c.count * n : c.count;
}

/// Rank `rank`'s input values for a call (random, exactly representable; see tests/mp/data.h).
std::vector<double> inputOf(uint64_t seed, int rank, const CollCall& c, int n) {
  return makeInput(seed, rank, inCount(c, n), c.dtype, reduces(c.coll) ? c.op : hocclSum);
}

/// Reference output of `rank` (doubles), computed from every rank's input; empty when the rank has no output.
std::vector<double> reference(const CollCall& c, int rank, int n, const std::vector<std::vector<double>>& in) {
  auto reduceAt = [&](size_t offset) {
    std::vector<double> out(c.count);
    for (size_t i = 0; i < c.count; ++i) {
      double acc = in[0][offset + i];
      for (int q = 1; q < n; ++q) acc = test::combine(acc, in[q][offset + i], c.op);
      out[i] = test::finish(acc, n, c.op, c.dtype);
    }
    return out;
  };
  switch (c.coll) {
    case Coll::AllReduce: return reduceAt(0);
    case Coll::Reduce: return rank == c.root ? reduceAt(0) : std::vector<double>();
    case Coll::ReduceScatter: return reduceAt(static_cast<size_t>(rank) * c.count);
    case Coll::Broadcast: return in[c.root];
    case Coll::AllGather: {
      std::vector<double> out;
      for (int q = 0; q < n; ++q) out.insert(out.end(), in[q].begin(), in[q].end());
      return out;
    }
    case Coll::AlltoAll: {  // block `rank` of every rank's input, in rank order
      std::vector<double> out;
      const auto at = static_cast<std::ptrdiff_t>(static_cast<size_t>(rank) * c.count);
      for (int q = 0; q < n; ++q)
        out.insert(out.end(), in[q].begin() + at, in[q].begin() + at + static_cast<std::ptrdiff_t>(c.count));
      return out;
    }
    default: FAIL("no reference for this collective"); return {};
  }
}

/// One rank's buffers for a call, in or out of place as the C API defines it, plus its inputs as written.
struct Prepared {
  CollCall call;
  bool inPlace = false;
  Buffer send, recv;  // out of place
  Buffer both;        // in place: the one buffer
  std::vector<double> input;
};

/// Prepares rank r's buffers for call c (sendbuf/recvbuf are filled in).
void prepare(Prepared& p, const CollCall& c, int r, int n, bool inPlace, const std::vector<double>& input) {
  p.call = c;
  p.inPlace = inPlace;
  p.input = input;
  const size_t elem = elemSize(c.dtype), in = inCount(c, n) * elem, out = outCount(c, n) * elem;
  if (!inPlace) {
    p.send = Buffer(in);
    p.recv = Buffer(out);  // canary until written
    test::store(input, p.send.data(), c.dtype);
    p.call.sendbuf = p.send.data();
    p.call.recvbuf = p.recv.data();
    return;
  }
  p.both = Buffer(std::max(in, out));
  unsigned char* b = p.both.data();
  switch (c.coll) {
    case Coll::AllGather:
      test::store(input, b + static_cast<size_t>(r) * c.count * elem, c.dtype);
      p.call.sendbuf = b + static_cast<size_t>(r) * c.count * elem;
      p.call.recvbuf = b;
      break;
    case Coll::ReduceScatter:
      test::store(input, b, c.dtype);
      p.call.sendbuf = b;
      p.call.recvbuf = b + static_cast<size_t>(r) * c.count * elem;
      break;
    default:
      test::store(input, b, c.dtype);
      p.call.sendbuf = b;
      p.call.recvbuf = b;
  }
}

/// Checks rank r's buffers after its call completed: the output against the reference, every other byte untouched.
/// Returns "" or what is wrong.
std::string verify(const Prepared& p, int r, int n, const std::vector<std::vector<double>>& in) {
  const CollCall& c = p.call;
  const std::vector<double> want = reference(c, r, n, in);
  const std::string what = fmt::format("rank {} {}{}", r, describeCall(c), p.inPlace ? " in place" : "");
  auto compare = [&](const void* got, const std::vector<double>& expect, const char* label) -> std::string {
    const std::vector<double> have = test::load(got, expect.size(), c.dtype);
    for (size_t i = 0; i < expect.size(); ++i)
      if (!test::close(have[i], expect[i], c.dtype, reduces(c.coll) ? c.op : hocclSum))
        return fmt::format("{}: {} element {} is {}, expected {}", what, label, i, have[i], expect[i]);
    return "";
  };
  if (!p.inPlace) {
    if (!p.send.guardsIntact() || !p.recv.guardsIntact()) return what + ": a guard byte changed";
    if (auto e = compare(p.send.data(), p.input, "input"); !e.empty()) return e;
    if (want.empty()) return p.recv.untouched() ? "" : what + ": the output of a rank without output changed";
    return compare(p.recv.data(), want, "output");
  }
  if (!p.both.guardsIntact()) return what + ": a guard byte changed";
  const unsigned char* b = p.both.data();
  switch (c.coll) {
    case Coll::AllGather: return compare(b, want, "output");
    case Coll::ReduceScatter: {
      // The output block holds the result; the other blocks of the input are left as they were.
      std::vector<double> rest = p.input;
      for (size_t i = 0; i < c.count; ++i) rest[static_cast<size_t>(r) * c.count + i] = want[i];
      return compare(b, rest, "buffer");
    }
    default: return compare(b, want.empty() ? p.input : want, want.empty() ? "input (no output)" : "output");
  }
}

CollCall makeCall(Coll coll, size_t count, hocclDataType_t dt, hocclRedOp_t op = hocclSum, int root = 0) {
  CollCall c;
  c.coll = coll;
  c.count = count;
  c.dtype = dt;
  c.op = op;
  c.root = root;
  return c;
}

// ------------------------------------------------------------------------------------------------------------------
// Driving ops from one thread

struct Outcome {
  bool done = false;
  bool threw = false;
  hocclResult_t code = hocclSuccess;
  std::string what;
};

/// Polls every op (null: that rank does not take part) round robin until each is done or has thrown.
std::vector<Outcome> driveAll(const std::vector<ShortcutOp*>& ops,
                              std::chrono::seconds limit = std::chrono::seconds(20)) {
  std::vector<Outcome> out(ops.size());
  for (size_t r = 0; r < ops.size(); ++r) out[r].done = ops[r] == nullptr;
  const auto deadline = Clock::now() + limit;
  while (true) {
    bool all = true;
    for (size_t r = 0; r < ops.size(); ++r) {
      if (out[r].done || out[r].threw) continue;
      try {
        out[r].done = ops[r]->poll();
      } catch (const Error& e) {
        out[r].threw = true;
        out[r].code = e.code();
        out[r].what = e.what();
      }
      all = all && (out[r].done || out[r].threw);
    }
    if (all) return out;
    if (Clock::now() > deadline) FAIL("driveAll: ops still running after the limit");
  }
}

/// Runs one call on every rank through each rank's shortcut `pick` and checks every rank's buffers.
void runAndVerify(std::vector<std::unique_ptr<Rank>>& ranks, const CollCall& c, bool inPlace, uint64_t seed,
                  bool singleCopy) {
  const int n = static_cast<int>(ranks.size());
  std::vector<std::vector<double>> in(n);
  std::vector<Prepared> p(n);
  std::vector<std::unique_ptr<ShortcutOp>> ops(n);
  std::vector<ShortcutOp*> raw(n);
  for (int r = 0; r < n; ++r) in[r] = inputOf(seed, r, c, n);
  for (int r = 0; r < n; ++r) {
    prepare(p[r], c, r, n, inPlace, in[r]);
    Shortcut& s = singleCopy ? *ranks[r]->copy : *ranks[r]->small;
    ops[r] = s.start(p[r].call);
    raw[r] = ops[r].get();
  }
  auto out = driveAll(raw);
  for (int r = 0; r < n; ++r) {
    INFO(fmt::format("rank {} {}{}: {}", r, describeCall(c), inPlace ? " in place" : "", out[r].what));
    REQUIRE(out[r].done);
    const std::string bad = verify(p[r], r, n, in);
    INFO(bad);
    CHECK(bad.empty());
  }
}

const hocclDataType_t kAllTypes[] = {hocclInt8,   hocclUint8,    hocclInt32,      hocclUint32,
                                     hocclInt64,  hocclUint64,   hocclFloat16,    hocclFloat,
                                     hocclDouble, hocclBfloat16, hocclFloat8e4m3, hocclFloat8e5m2};
const hocclRedOp_t kAllOps[] = {hocclSum, hocclProd, hocclMax, hocclMin, hocclAvg};

}  // namespace

// ==================================================================================================================
// Sequence numbers and slot reuse

namespace {

/// What a call of the mixed rounds below is.
struct RoundSpec {
  Coll coll;
  int root;
  size_t count;
};

bool needsPeer(const RoundSpec& c, int r, int q) {
  if (q == r) return false;
  if (c.coll == Coll::Broadcast) return r != c.root && q == c.root;
  if (c.coll == Coll::Reduce) return r == c.root;
  return true;
}

/// The protocol of shm_session.h, as a model: rank r's round k may publish once every peer has published round
/// k-S+1 (or k < S); it is done once it has published and every peer it needs has published round k.
struct SlotModel {
  int n;
  std::vector<uint64_t> published;  // per rank: the last round it published
  bool mayPublish(int r, uint64_t k) const {
    if (k < S) return true;
    for (int q = 0; q < n; ++q)
      if (q != r && published[q] < k - S + 1) return false;
    return true;
  }
  bool waitsOn(int r, uint64_t k, bool pub, const RoundSpec& c, int q) const {
    if (q == r) return false;
    if (!pub) return k >= S && published[q] < k - S + 1;
    return needsPeer(c, r, q) && published[q] < k;
  }
};

struct SimRank {
  uint64_t completed = 0;          // rounds done
  std::unique_ptr<ShortcutOp> op;  // round completed+1 when set
  bool pub = false;                // the model says the op has published
  Prepared prep;
  unsigned held = 0;  // polls where the model says it could not publish (its slot still in use)
};

/// Runs `rounds` rounds of `spec(k)` on every rank from this thread. Each step, rank r acts (creates its next op
/// when it has none, polls it once) with probability speed(r, step). Every poll is checked against the model: its
/// result, and the peers missing() names. Every completed round is checked against the reference, then the rank
/// scribbles over its input (the arena must already hold what it published). Returns the held polls per rank.
std::vector<unsigned> simulate(std::vector<std::unique_ptr<Rank>>& ranks, uint64_t rounds,
                               const std::function<RoundSpec(uint64_t)>& spec,
                               const std::function<double(int, uint64_t)>& speed, uint64_t seed) {
  const int n = static_cast<int>(ranks.size());
  SlotModel model{n, std::vector<uint64_t>(n, 0)};
  std::vector<SimRank> sim(n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  // Every rank's inputs of round k, kept until every rank has checked it.
  auto inputs = [&](uint64_t k) {
    const RoundSpec s = spec(k);
    const CollCall c = makeCall(s.coll, s.count, hocclFloat, hocclSum, s.root);
    std::vector<std::vector<double>> in(n);
    for (int q = 0; q < n; ++q) in[q] = inputOf(seed * 1000 + k, q, c, n);
    return in;
  };
  uint64_t step = 0;
  auto allDone = [&] {
    return std::all_of(sim.begin(), sim.end(), [&](const SimRank& s) { return s.completed == rounds; });
  };
  while (!allDone()) {
    REQUIRE(++step < 2'000'000);
    for (int r = 0; r < n; ++r) {
      SimRank& s = sim[r];
      if (s.completed == rounds || coin(rng) >= speed(r, step)) continue;
      const uint64_t k = s.completed + 1;
      const RoundSpec rs = spec(k);
      if (!s.op) {
        const CollCall c = makeCall(rs.coll, rs.count, hocclFloat, hocclSum, rs.root);
        prepare(s.prep, c, r, n, false, inputs(k)[r]);
        REQUIRE(ranks[r]->small->canRun(s.prep.call));
        s.op = ranks[r]->small->start(s.prep.call);
        s.pub = false;
      }
      if (!s.pub && model.mayPublish(r, k)) {
        s.pub = true;
        model.published[r] = k;
      }
      bool expectDone = s.pub;
      for (int q = 0; q < n; ++q) expectDone = expectDone && !(needsPeer(rs, r, q) && model.published[q] < k);
      const bool done = s.op->poll();
      INFO(fmt::format("step {}: rank {} round {} ({} root {}), published {}", step, r, k, collName(rs.coll), rs.root,
                       fmt::join(model.published, ",")));
      REQUIRE(done == expectDone);
      if (!done) {
        if (!s.pub) ++s.held;
        const std::string missing = s.op->missing();
        for (int q = 0; q < n; ++q) {
          INFO("missing() = " << missing << ", about rank " << q);
          CHECK((missing.find(fmt::format("rank {} (", q)) != std::string::npos) == model.waitsOn(r, k, s.pub, rs, q));
        }
        continue;
      }
      CHECK(s.op->missing() == "nobody");
      const std::string bad = verify(s.prep, r, n, inputs(k));
      INFO(bad);
      REQUIRE(bad.empty());
      std::memset(s.prep.send.data(), 0x5A, s.prep.send.bytes);  // the caller may reuse its input at once
      s.op.reset();
      s.completed = k;
    }
  }
  std::vector<unsigned> held(n);
  for (int r = 0; r < n; ++r) held[r] = sim[r].held;
  return held;
}

}  // namespace

TEST_CASE("arena rounds: ranks that wait for nobody run ahead by at most kArenaSlots-1 rounds", "[shortcuts][slots]") {
  auto ranks = connectThreads(3);
  const uint64_t rounds = 25 * S;
  // Rank 1 is slow: it acts on 10% of the steps, and not at all during long stretches, so that the others reach
  // the slot it still holds.
  auto slowOne = [](int slow) {
    return [slow](int r, uint64_t step) { return r != slow ? 1.0 : (step / 200) % 3 == 1 ? 0.0 : 0.1; };
  };
  SECTION("broadcast, root 0 ahead, rank 1 slow; payloads inline (40 B), just beyond (44 B), in the data area") {
    for (size_t count : {size_t{10}, size_t{11}, size_t{500}}) {
      auto held = simulate(
          ranks, rounds,
          [count](uint64_t) {
        return RoundSpec{Coll::Broadcast, 0, count};
          },
          slowOne(1), count);
      INFO("count " << count << ": root held " << held[0] << " times");
      CHECK(held[0] > 0);  // the root did reach the slot the slow receiver still read
    }
  }
  SECTION("reduce, contributors 0 and 2 ahead of the slow root 1") {
    auto held = simulate(
        ranks, rounds,
        [](uint64_t) {
      return RoundSpec{Coll::Reduce, 1, 300};
        },
        slowOne(1), 7);
    CHECK(held[0] > 0);
    CHECK(held[2] > 0);
  }
  SECTION("runs of rooted rounds that only rank 1 waits in, between rounds everybody waits in; random speeds") {
    // Broadcasts rooted at 0 or 2 and reduces rooted at 1: ranks 0 and 2 wait for nobody, or only for each other,
    // so they run ahead of rank 1 until a slot stops them; every 12th round is an all-to-all one that lines all up.
    auto spec = [](uint64_t k) {
      static const RoundSpec rooted[] = {{Coll::Broadcast, 0, 9}, {Coll::Reduce, 1, 33},    {Coll::Broadcast, 2, 100},
                                         {Coll::Reduce, 1, 11},   {Coll::Broadcast, 0, 10}, {Coll::Reduce, 1, 200}};
      static const RoundSpec all[] = {{Coll::AllReduce, 0, 5}, {Coll::AllGather, 0, 3}, {Coll::ReduceScatter, 0, 7}};
      if (k % 12 == 0) return all[(k / 12) % 3];
      return rooted[(k * 5 + k / 7) % 6];
    };
    auto speeds = [](int r, uint64_t step) {
      return r == 1 ? ((step / 150) % 3 == 0 ? 0.0 : 0.15) : 0.4 + 0.25 * r + ((step / 50 + r) % 5 == 0 ? -0.3 : 0.0);
    };
    auto held = simulate(ranks, 60 * S, spec, speeds, 11);
    INFO("held polls per rank: " << held[0] << ", " << held[1] << ", " << held[2]);
    CHECK(held[0] > 0);
    CHECK(held[2] > 0);
  }
}

namespace {

/// Rounds of mixed calls on real threads or processes, each rank pausing at random (rank 1 much longer): checks
/// every result. Returns "" or the first problem.
std::string mixedRounds(Rank& st, int rounds, uint64_t seed) {
  const int n = st.nranks, r = st.rank;
  std::mt19937_64 rng(seed * 31 + static_cast<uint64_t>(r));
  for (int k = 1; k <= rounds; ++k) {
    static const RoundSpec mix[] = {{Coll::Broadcast, 0, 10},  {Coll::Reduce, 2, 300}, {Coll::Broadcast, 2, 11},
                                    {Coll::AllReduce, 0, 7},   {Coll::Reduce, 0, 1},   {Coll::AllGather, 0, 129},
                                    {Coll::Broadcast, 0, 500}, {Coll::Reduce, 1, 40},  {Coll::ReduceScatter, 0, 17}};
    const RoundSpec s = mix[(k * 5 + k / 7) % (sizeof(mix) / sizeof(mix[0]))];
    const CollCall c = makeCall(s.coll, s.count, hocclFloat, k % 3 ? hocclSum : hocclMax, s.root % n);
    std::vector<std::vector<double>> in(n);
    for (int q = 0; q < n; ++q) in[q] = inputOf(seed * 100000 + k, q, c, n);
    Prepared p;
    prepare(p, c, r, n, k % 4 == 0, in[r]);
    auto op = st.small->start(p.call);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!op->poll()) {
      if (Clock::now() > deadline) return fmt::format("round {} still waiting for {}", k, op->missing());
      std::this_thread::yield();
    }
    std::string bad = verify(p, r, n, in);
    if (!bad.empty()) return fmt::format("round {}: {}", k, bad);
    std::memset(p.inPlace ? p.both.data() : p.send.data(), 0x5A, p.inPlace ? p.both.bytes : p.send.bytes);
    const unsigned pause = static_cast<unsigned>(rng() % (r == 1 ? 400 : 40));
    if (pause > 30) std::this_thread::sleep_for(std::chrono::microseconds(pause));
  }
  return "";
}

}  // namespace

TEST_CASE("arena rounds under real concurrency: threads and processes, a slow rank", "[shortcuts][slots][fork]") {
  SECTION("3 threads, 600 rounds") {
    auto ranks = connectThreads(3);
    auto errors = runThreads(3, [&](int r) {
      std::string bad = mixedRounds(*ranks[r], 600, 5);
      if (!bad.empty()) throw std::runtime_error(bad);
    });
    INFO(firstError(errors));
    CHECK(firstError(errors).empty());
  }
  SECTION("3 processes, 600 rounds") {
    const boot::UniqueId id = boot::createUniqueId();
    auto results = runProcesses(3, [&](int r) {
      auto st = connectRank(id, r, 3);
      std::string bad = mixedRounds(*st, 600, 6);
      st->boot->barrier();
      return bad;
    });
    INFO(firstError(results));
    CHECK(firstError(results).empty());
  }
}

// ==================================================================================================================
// The small shortcut: every collective

TEST_CASE("small: every collective x every type x every op, odd counts, in and out of place", "[shortcuts][small]") {
  for (int n : {2, 3, 4}) {
    DYNAMIC_SECTION(n << " ranks") {
      auto ranks = connectThreads(n);
      uint64_t seed = 100 * n;
      int cases = 0;
      for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::Broadcast, Coll::AllGather, Coll::ReduceScatter}) {
        for (hocclDataType_t dt : kAllTypes) {
          for (hocclRedOp_t op : kAllOps) {
            if (!reduces(coll) && op != hocclSum) continue;
            for (size_t count : {size_t{1}, size_t{3}, size_t{17}, 2048 / elemSize(dt) - 1}) {
              for (bool inPlace : {false, true}) {
                const CollCall c = makeCall(coll, count, dt, op, static_cast<int>(seed % n));
                REQUIRE(ranks[0]->small->canRun(c));
                runAndVerify(ranks, c, inPlace, ++seed, false);
                ++cases;
              }
            }
          }
        }
      }
      INFO(cases << " calls");
      CHECK(cases > 500);
    }
  }
}

TEST_CASE("small: operating range", "[shortcuts][small]") {
  auto ranks = connectThreads(3);
  Shortcut& s = *ranks[0]->small;
  CHECK(std::string(s.name()) == "small");
  // At most 2 KiB per rank of the communicator, published by each rank (reduce-scatter publishes its whole input).
  CHECK(s.canRun(makeCall(Coll::AllReduce, 3 * 2048 / 4, hocclFloat)));
  CHECK_FALSE(s.canRun(makeCall(Coll::AllReduce, 3 * 2048 / 4 + 1, hocclFloat)));
  CHECK(s.canRun(makeCall(Coll::ReduceScatter, 2048 / 4, hocclFloat)));
  CHECK_FALSE(s.canRun(makeCall(Coll::ReduceScatter, 2048 / 4 + 1, hocclFloat)));
  CHECK_FALSE(s.canRun(makeCall(Coll::AlltoAll, 4, hocclFloat)));
  CHECK_FALSE(s.canRun(makeCall(Coll::Gather, 4, hocclFloat)));
  CollCall premul = makeCall(Coll::AllReduce, 4, hocclFloat);
  premul.op = static_cast<hocclRedOp_t>(hocclNumOps);
  CHECK_FALSE(s.canRun(premul));
  CollCall device = makeCall(Coll::AllReduce, 4, hocclFloat);
  device.recvKind = kernels::MemoryKind::Device;
  CHECK_FALSE(s.canRun(device));
}

// ==================================================================================================================
// Single copy

namespace {

struct CopyCase {
  Coll coll;
  hocclDataType_t dt;
  hocclRedOp_t op;
  int root;
};

const CopyCase kCopyCases[] = {
    {Coll::AllReduce, hocclFloat, hocclSum, 0},      {Coll::AllReduce, hocclDouble, hocclAvg, 0},
    {Coll::AllReduce, hocclInt32, hocclMax, 0},      {Coll::AllReduce, hocclBfloat16, hocclMin, 0},
    {Coll::AllReduce, hocclInt64, hocclProd, 0},     {Coll::ReduceScatter, hocclFloat, hocclSum, 0},
    {Coll::ReduceScatter, hocclDouble, hocclAvg, 0}, {Coll::ReduceScatter, hocclInt32, hocclMin, 0},
    {Coll::AllGather, hocclFloat, hocclSum, 0},      {Coll::AllGather, hocclUint8, hocclSum, 0},
    {Coll::Broadcast, hocclFloat, hocclSum, 0},      {Coll::Broadcast, hocclUint8, hocclSum, 2},
    {Coll::Broadcast, hocclDouble, hocclSum, 1},     {Coll::AlltoAll, hocclFloat, hocclSum, 0},
    {Coll::AlltoAll, hocclUint8, hocclSum, 0},       {Coll::AlltoAll, hocclDouble, hocclSum, 0},
};
// Not divisible by 3 ranks; the largest all-reduce blocks span several 256 KiB pieces.
const size_t kCopyCounts[] = {1, 2, 7, 100003, (size_t{1} << 18) + 1};
constexpr size_t kLargestOnlyForAllReduce = (size_t{1} << 18) + 1;  // the others span several pieces at 100003

/// Runs every single-copy case on this rank (all ranks run the same list); returns "" or the first problem.
std::string singleCopyCases(Rank& st, uint64_t seed) {
  const int n = st.nranks, r = st.rank;
  if (!st.copy) return "SKIP";
  for (const CopyCase& cc : kCopyCases) {
    for (size_t count : kCopyCounts) {
      if (count == kLargestOnlyForAllReduce && cc.coll != Coll::AllReduce) continue;
      for (bool inPlace : {false, true}) {
        const CollCall c = makeCall(cc.coll, count, cc.dt, cc.op, cc.root % n);
        std::vector<std::vector<double>> in(n);
        for (int q = 0; q < n; ++q) in[q] = inputOf(++seed, q, c, n);
        Prepared p;
        prepare(p, c, r, n, inPlace, in[r]);
        const size_t message = std::max(inCount(c, n), outCount(c, n)) * elemSize(c.dtype);
        // canRun: from the measured crossovers (all-gather 32 KiB, broadcast 128 KiB, all-to-all 16 MiB, others
        // 256 KiB); start() takes any size, which lets the small counts test the block arithmetic.
        const size_t threshold = c.coll == Coll::AllGather   ? 32 << 10
                                 : c.coll == Coll::Broadcast ? 128 << 10
                                 : c.coll == Coll::AlltoAll  ? 16 << 20
                                                             : 256 << 10;
        if (st.copy->canRun(c) != (message >= threshold))
          return fmt::format("canRun({}) is {} for {} bytes", describeCall(c), st.copy->canRun(c), message);
        auto op = st.copy->start(p.call);
        const auto deadline = Clock::now() + std::chrono::seconds(20);
        while (!op->poll()) {
          if (Clock::now() > deadline) return describeCall(c) + " still waiting for " + op->missing();
          std::this_thread::yield();
        }
        std::string bad = verify(p, r, n, in);
        if (!bad.empty()) return bad;
      }
    }
  }
  return "";
}

/// Runs `cases` (a rank's share of a test, returning "" or its first problem, "SKIP" when the single copy cannot run)
/// on 3 forked processes (process_vm_readv/writev; skipped with a warning where cross-memory attach is refused), then
/// on `threads` threads of this process (one address space: memcpy). Seeds: `seed` and `seed` + 1000.
void onProcessesAndThreads(const std::function<std::string(Rank&, uint64_t)>& cases, int threads, uint64_t seed) {
  SECTION("3 processes (process_vm_readv/writev)") {
    const boot::UniqueId id = boot::createUniqueId();
    auto results = runProcesses(3, [&](int r) {
      auto st = connectRank(id, r, 3);
      std::string bad = cases(*st, seed);
      st->boot->barrier();
      return bad;
    });
    if (results[0] == "SKIP") {
      WARN("single copy not permitted between processes here (arena crossMemory() is false): not tested");
    } else {
      INFO(firstError(results));
      CHECK(firstError(results).empty());
    }
  }
  SECTION("threads (one address space: memcpy)") {
    auto ranks = connectThreads(threads);
    REQUIRE(bool(ranks[0]->copy));  // a process may always read itself
    auto errors = runThreads(threads, [&](int r) {
      std::string bad = cases(*ranks[r], seed + 1000);
      if (!bad.empty()) throw std::runtime_error(bad);
    });
    INFO(firstError(errors));
    CHECK(firstError(errors).empty());
  }
}

}  // namespace

TEST_CASE("single copy: all-reduce, reduce-scatter, all-gather, broadcast, all-to-all; odd counts; in place",
          "[shortcuts][copy][fork]") {
  onProcessesAndThreads(singleCopyCases, 3, 1000);
}

namespace {

/// A fold order of `total` elements over n ranks from `seed`: segments of random lengths (some empty, some across
/// the single copy's pieces), each with a random permutation. The same on every rank.
std::shared_ptr<const kernels::FoldOrder> randomFold(uint64_t seed, size_t total, int n) {
  std::mt19937_64 rng(seed);
  auto fold = std::make_shared<kernels::FoldOrder>();
  for (int k = 0; k < 4; ++k) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    fold->orders.push_back(order);
  }
  std::uniform_int_distribution<size_t> step(0, std::max<size_t>(1, total / 5));
  for (size_t at = 0; at < total || fold->segments.empty(); at += step(rng))
    fold->segments.push_back({at, static_cast<uint32_t>(rng() % fold->orders.size())});
  return fold;
}

/// Runs single-copy all-reduces and reduce-scatters with a random fold on this rank; every output element must equal,
/// byte for byte, its inputs reduced pairwise in the fold's order (the CPU kernel, one element at a time).
std::string foldCases(Rank& st, uint64_t seed) {
  const int n = st.nranks, r = st.rank;
  if (!st.copy) return "SKIP";
  if (!st.copy->followsFold()) return "single copy says it does not follow a fold";
  const CopyCase cases[] = {
      {Coll::AllReduce, hocclFloat, hocclSum, 0},    {Coll::AllReduce, hocclFloat16, hocclSum, 0},
      {Coll::AllReduce, hocclBfloat16, hocclSum, 0}, {Coll::AllReduce, hocclFloat, hocclAvg, 0},
      {Coll::AllReduce, hocclDouble, hocclProd, 0},  {Coll::ReduceScatter, hocclFloat, hocclSum, 0},
      {Coll::ReduceScatter, hocclFloat16, hocclSum, 0}};
  for (const CopyCase& cc : cases)
    for (size_t count : {size_t{7}, size_t{100003}, (size_t{1} << 18) + 1}) {
      if (count > 100003 && cc.coll != Coll::AllReduce) continue;
      for (bool inPlace : {false, true}) {
        CollCall c = makeCall(cc.coll, count, cc.dt, cc.op);
        const size_t total = inCount(c, n), elem = elemSize(c.dtype);
        c.fold = randomFold(++seed, total, n);
        std::vector<std::vector<double>> in(n);
        std::vector<std::vector<char>> typed(n, std::vector<char>(total * elem));
        // Values with many significant bits (inputOf's are small integers, whose sums come out the same in any
        // order); products near 1.
        std::mt19937_64 values(seed * 31 + 7);
        std::uniform_real_distribution<double> value(c.op == hocclProd ? 0.5 : -3.0, c.op == hocclProd ? 1.5 : 3.0);
        for (int q = 0; q < n; ++q) {
          in[q].resize(total);
          for (double& x : in[q]) x = value(values);
          test::store(in[q], typed[q].data(), c.dtype);
        }
        Prepared p;
        prepare(p, c, r, n, inPlace, in[r]);
        auto op = st.copy->start(p.call);
        const auto deadline = Clock::now() + std::chrono::seconds(20);
        while (!op->poll()) {
          if (Clock::now() > deadline) return describeCall(c) + " still waiting for " + op->missing();
          std::this_thread::yield();
        }
        const size_t first = c.coll == Coll::AllReduce ? 0 : static_cast<size_t>(r) * count;
        const auto* got = static_cast<const char*>(p.call.recvbuf);
        for (size_t i = 0; i < count; ++i) {  // all-reduce: the whole output; reduce-scatter: block r
          const size_t e = first + i;
          const std::vector<char> want = test::foldedElement(*c.fold, typed, e, c.dtype, c.op, n);
          if (std::memcmp(want.data(), got + i * elem, elem) != 0)
            return fmt::format("rank {} {}{}: element {} is not its inputs folded in the order given", r,
                               describeCall(c), inPlace ? " in place" : "", e);
        }
      }
    }
  return "";
}

}  // namespace

TEST_CASE("single copy follows a fold: every element, bit for bit, in the order the call gives",
          "[shortcuts][copy][fold][fork]") {
  onProcessesAndThreads(foldCases, 4, 3000);
}

TEST_CASE("single copy for registered buffers only: on ordinary buffers every rank declines and no byte changes",
          "[shortcuts][copy][registered]") {
  // The tuner's conditional choice (algo::Choice::ifRegistered) relies on this: after the address round every rank
  // sees that some buffers are not registered, ends the op as declined, and the schedule then runs on buffers that
  // nothing has touched.
  for (const CollCall& c : {makeCall(Coll::AllReduce, 100003, hocclFloat), makeCall(Coll::AllGather, 50001, hocclFloat),
                            makeCall(Coll::Broadcast, 70001, hocclInt32, hocclSum, 1)}) {
    DYNAMIC_SECTION(describeCall(c)) {
      auto ranks = connectThreads(3);
      REQUIRE(bool(ranks[0]->copy));
      std::vector<Prepared> p(3);
      std::vector<std::vector<unsigned char>> sendBefore(3);
      std::vector<std::unique_ptr<ShortcutOp>> ops(3);
      for (int r = 0; r < 3; ++r) {
        prepare(p[r], c, r, 3, false, inputOf(r + 7, r, c, 3));
        sendBefore[r] = p[r].send.raw;
        ops[r] = ranks[r]->copy->startIfRegistered(p[r].call);
      }
      auto out = driveAll({ops[0].get(), ops[1].get(), ops[2].get()});
      for (int r = 0; r < 3; ++r) {
        INFO("rank " << r << ": " << (out[r].threw ? out[r].what : std::string("no error")));
        CHECK(out[r].done);
        CHECK(ops[r]->declined());
        CHECK(p[r].recv.untouched());
        CHECK(p[r].send.raw == sendBefore[r]);
      }
      // The same call started unconditionally runs and writes the outputs (the test above checks their values).
      for (int r = 0; r < 3; ++r) ops[r] = ranks[r]->copy->start(p[r].call);
      out = driveAll({ops[0].get(), ops[1].get(), ops[2].get()});
      for (int r = 0; r < 3; ++r) {
        CHECK(out[r].done);
        CHECK_FALSE(ops[r]->declined());
        CHECK_FALSE(p[r].recv.untouched());
      }
    }
  }
}

// ==================================================================================================================
// Peers that never arrive, dead peers, abort

namespace {

/// Polls op until it throws; returns the error and the seconds it took. Checks on the way that poll() keeps
/// returning false and missing() names `peer`.
std::pair<Error, double> pollUntilThrow(ShortcutOp& op, int peer, double limitSeconds) {
  const auto start = Clock::now();
  unsigned polls = 0;
  while (true) {
    bool done = false;
    try {
      done = op.poll();
    } catch (const Error& e) {
      return {e, std::chrono::duration<double>(Clock::now() - start).count()};
    }
    REQUIRE_FALSE(done);
    if (++polls % 4096 == 1) {
      const std::string missing = op.missing();
      INFO("missing() = " << missing);
      CHECK(missing.find(fmt::format("rank {} (host testhost, pid ", peer)) != std::string::npos);
    }
    REQUIRE(std::chrono::duration<double>(Clock::now() - start).count() < limitSeconds);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

/// Calls fn from another thread after `delay`; joins on destruction (also when a REQUIRE fails meanwhile).
struct Later {
  std::thread t;
  Later(std::chrono::milliseconds delay, std::function<void()> fn)
      : t([delay, fn = std::move(fn)] {
          std::this_thread::sleep_for(delay);
          fn();
        }) {}
  ~Later() { t.join(); }
};

void expectSilentPeerError(const Error& e, double seconds, int peer) {
  INFO(e.what());
  CHECK(e.code() == hocclTimeout);
  CHECK(std::string(e.what()).find(fmt::format("rank {} (host testhost", peer)) != std::string::npos);
  CHECK(seconds >= kTimeoutSeconds);
  CHECK(seconds < kTimeoutSeconds + 3);
}

}  // namespace

TEST_CASE("a peer that never arrives: poll() stays false, missing() names it, HOCCL_TIMEOUT ends the wait",
          "[shortcuts][timeout]") {
  SECTION("small all-reduce waiting for rank 1's payload") {
    auto ranks = connectThreads(2);
    float in[3] = {1, 2, 3}, out[3];
    CollCall c = makeCall(Coll::AllReduce, 3, hocclFloat);
    c.sendbuf = in;
    c.recvbuf = out;
    auto op = ranks[0]->small->start(c);
    auto [e, seconds] = pollUntilThrow(*op, 1, kTimeoutSeconds + 5);
    expectSilentPeerError(e, seconds, 1);
  }
  SECTION("single copy waiting in its address round; 3 ranks, rank 2 absent") {
    auto ranks = connectThreads(3);
    std::vector<float> in(1000, 1.0f), out(1000);
    CollCall c = makeCall(Coll::AllGather, 1000 / 3, hocclFloat);
    c.sendbuf = in.data();
    c.recvbuf = out.data();
    auto op0 = ranks[0]->copy->start(c);
    auto op1 = ranks[1]->copy->start(c);
    REQUIRE_FALSE(op1->poll());  // rank 1 arrives too: only rank 2 is missing
    auto [e, seconds] = pollUntilThrow(*op0, 2, kTimeoutSeconds + 5);
    expectSilentPeerError(e, seconds, 2);
    CHECK(std::string(e.what()).find("rank 1 (") == std::string::npos);
    CHECK(op1->missing().find("rank 2 (") != std::string::npos);
  }
  SECTION("a broadcast root held back by a receiver that never started: the slot it would overwrite") {
    auto ranks = connectThreads(2);
    float v[4] = {1, 2, 3, 4};
    CollCall c = makeCall(Coll::Broadcast, 4, hocclFloat, hocclSum, 0);
    c.sendbuf = v;
    c.recvbuf = v;
    for (uint64_t k = 1; k < S; ++k) CHECK(ranks[0]->small->start(c)->poll());  // rounds 1..S-1 need nobody
    auto op = ranks[0]->small->start(c);  // round S reuses round 1's slot, which rank 1 has not even started
    auto [e, seconds] = pollUntilThrow(*op, 1, kTimeoutSeconds + 5);
    expectSilentPeerError(e, seconds, 1);
  }
}

TEST_CASE("a peer process that dies is reported, naming it, before the timeout", "[shortcuts][timeout][fork]") {
  const boot::UniqueId id = boot::createUniqueId();
  auto results = runProcesses(2, [&](int r) -> std::string {
    auto st = connectRank(id, r, 2);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      _exit(0);  // no goodbye, nothing destroyed: as a crash
    }
    double in[5] = {1, 2, 3, 4, 5}, out[5];
    CollCall c = makeCall(Coll::AllReduce, 5, hocclDouble);
    c.sendbuf = in;
    c.recvbuf = out;
    auto op = st->small->start(c);
    const auto start = Clock::now();
    try {
      while (!op->poll()) {
        if (Clock::now() - start > std::chrono::seconds(kTimeoutSeconds + 5)) return "no error";
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      return "completed without its peer";
    } catch (const Error& e) {
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (e.code() != hocclRemoteError) return fmt::format("code {}: {}", e.code(), e.what());
      if (std::string(e.what()).find("rank 1 (") == std::string::npos) return std::string("names no peer: ") + e.what();
      if (seconds >= kTimeoutSeconds)
        return fmt::format("took {:.1f} s, as long as the timeout: {}", seconds, e.what());
    }
    return "";
  });
  INFO(results[0]);
  CHECK(results[0].empty());
}

TEST_CASE("the call board: a peer that makes the call on device buffers (never in the arena) fails the wait at "
          "once; the same call, or a note of another collective, does not",
          "[shortcuts][board]") {
  auto ranks = connectThreads(2);
  float in[3] = {1, 2, 3}, out[3] = {0, 0, 0};
  CollCall c = makeCall(Coll::AllReduce, 3, hocclFloat);
  c.sendbuf = in;
  c.recvbuf = out;
  c.number = 7;
  SECTION("device buffers on rank 1: rank 0's small all-reduce fails naming both calls and kinds") {
    CollCall theirs = c;
    theirs.sendKind = theirs.recvKind = kernels::MemoryKind::Device;
    ranks[1]->small->noteCall(theirs);
    auto op = ranks[0]->small->start(c);
    auto [e, seconds] = pollUntilThrow(*op, 1, kTimeoutSeconds);
    INFO(e.what());
    CHECK(e.code() == hocclInvalidUsage);
    CHECK(e.breaksCommunicator());  // a mismatch: the job's verdict releases rank 1
    CHECK(seconds < 1.5);
    for (const char* part : {"call #6", "AllReduce(count=3, float, sum) on host buffers",
                             "rank 1 (host testhost", "AllReduce(count=3, float, sum) on device buffers",
                             "must pass device buffers, or every rank host buffers"})
      CHECK(std::string(e.what()).find(part) != std::string::npos);
    CHECK(out[0] == 0);
  }
  SECTION("another count on rank 1, noted but not yet published: the same failure, naming the counts") {
    CollCall theirs = c;
    theirs.count = 4;
    ranks[1]->small->noteCall(theirs);
    auto op = ranks[0]->small->start(c);
    auto [e, seconds] = pollUntilThrow(*op, 1, kTimeoutSeconds);
    INFO(e.what());
    CHECK(e.code() == hocclInvalidUsage);
    CHECK(std::string(e.what()).find("AllReduce(count=4, float, sum) on host buffers") != std::string::npos);
    CHECK(std::string(e.what()).find("same count, type, op and root") != std::string::npos);
  }
  SECTION("rank 1 noted the same call, or a differing one under another number: rank 0 waits, then both finish") {
    const bool same = GENERATE(true, false);
    CollCall noted = c;
    if (!same) {
      noted.number = 7 + shm::kArenaNotes;  // the same board line, a later collective: not this one
      noted.sendKind = noted.recvKind = kernels::MemoryKind::Device;
    }
    ranks[1]->small->noteCall(noted);
    auto op0 = ranks[0]->small->start(c);
    for (int i = 0; i < 20000; ++i) REQUIRE_FALSE(op0->poll());  // past the board check (every 1024 polls)
    float in1[3] = {10, 20, 30}, out1[3] = {0, 0, 0};
    CollCall c1 = c;
    c1.sendbuf = in1;
    c1.recvbuf = out1;
    auto op1 = ranks[1]->small->start(c1);
    auto out2 = driveAll({op0.get(), op1.get()});
    CHECK_FALSE(out2[0].threw);
    CHECK_FALSE(out2[1].threw);
    for (int i = 0; i < 3; ++i) {
      CHECK(out[i] == in[i] + in1[i]);
      CHECK(out1[i] == in[i] + in1[i]);
    }
  }
}

TEST_CASE("Health::abort() makes a waiting poll throw hocclInvalidUsage", "[shortcuts][abort]") {
  auto ranks = connectThreads(2);
  int in[2] = {1, 2}, out[2] = {0, 0};
  CollCall c = makeCall(Coll::AllReduce, 2, hocclInt32);
  c.sendbuf = in;
  c.recvbuf = out;
  SECTION("small") {
    auto op = ranks[0]->small->start(c);
    Later aborter(std::chrono::milliseconds(200), [&] { ranks[0]->health.abort(); });
    auto [e, seconds] = pollUntilThrow(*op, 1, kTimeoutSeconds);
    INFO(e.what());
    CHECK(e.code() == hocclInvalidUsage);
    CHECK(seconds >= 0.2);
    CHECK(seconds < 1.5);
  }
  SECTION("single copy") {
    auto op = ranks[0]->copy->start(c);
    Later aborter(std::chrono::milliseconds(200), [&] { ranks[0]->health.abort(); });
    auto [e, seconds] = pollUntilThrow(*op, 1, kTimeoutSeconds);
    INFO(e.what());
    CHECK(e.code() == hocclInvalidUsage);
    CHECK(seconds < 1.5);
  }
  CHECK(out[0] == 0);
}

// ==================================================================================================================
// Mismatched calls

namespace {

/// Each rank r starts calls[r] through its shortcut (small or single copy) with canary outputs; returns every
/// rank's outcome and checks that no buffer changed.
std::vector<Outcome> runMismatch(std::vector<std::unique_ptr<Rank>>& ranks, const std::vector<CollCall>& calls,
                                 const std::vector<bool>& singleCopy) {
  const int n = static_cast<int>(ranks.size());
  std::vector<Prepared> p(n);
  std::vector<std::unique_ptr<ShortcutOp>> ops(n);
  std::vector<ShortcutOp*> raw(n);
  std::vector<std::vector<unsigned char>> sendBefore(n);
  for (int r = 0; r < n; ++r) {
    prepare(p[r], calls[r], r, n, false, inputOf(r + 1, r, calls[r], n));
    sendBefore[r] = p[r].send.raw;
    Shortcut& s = singleCopy[r] ? *ranks[r]->copy : *ranks[r]->small;
    ops[r] = s.start(p[r].call);
    raw[r] = ops[r].get();
  }
  auto out = driveAll(raw);
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " called " << describeCall(calls[r]));
    CHECK(p[r].recv.untouched());
    CHECK(p[r].send.raw == sendBefore[r]);
  }
  return out;
}

/// rank r failed with InvalidUsage naming its call and `other`.
void expectMismatchError(const Outcome& o, int r, const CollCall& mine, const CollCall& other) {
  INFO("rank " << r << ": " << (o.threw ? o.what : std::string("no error")));
  REQUIRE(o.threw);
  CHECK(o.code == hocclInvalidUsage);
  CHECK(o.what.find(describeCall(mine)) != std::string::npos);
  CHECK(o.what.find(describeCall(other)) != std::string::npos);
  CHECK(o.what.find("do not match") != std::string::npos);
}

}  // namespace

TEST_CASE("mismatched calls: every rank fails naming both calls, no byte changes", "[shortcuts][mismatch]") {
  struct Pair {
    const char* label;
    CollCall a, b;  // rank 0 calls a, the others b
    bool copyA = false, copyB = false;
    bool only2 = false;  // with 3 ranks a rank would wait for nobody (see the known-gap test below)
  };
  const Pair pairs[] = {
      {"small: counts 5 vs 6", makeCall(Coll::AllReduce, 5, hocclFloat), makeCall(Coll::AllReduce, 6, hocclFloat)},
      {"small: all-reduce vs reduce-scatter", makeCall(Coll::AllReduce, 4, hocclFloat),
       makeCall(Coll::ReduceScatter, 4, hocclFloat)},
      {"small: float vs int32", makeCall(Coll::AllReduce, 8, hocclFloat), makeCall(Coll::AllReduce, 8, hocclInt32)},
      {"small: sum vs max", makeCall(Coll::AllReduce, 8, hocclFloat, hocclSum),
       makeCall(Coll::AllReduce, 8, hocclFloat, hocclMax)},
      {"small: all-gather 100 vs 200", makeCall(Coll::AllGather, 100, hocclFloat),
       makeCall(Coll::AllGather, 200, hocclFloat)},
      {"small: reduce, each rank the root of its own call", makeCall(Coll::Reduce, 6, hocclFloat, hocclSum, 0),
       makeCall(Coll::Reduce, 6, hocclFloat, hocclSum, 1), false, false, true},
      {"small: broadcast, each rank naming the other as root", makeCall(Coll::Broadcast, 6, hocclFloat, hocclSum, 1),
       makeCall(Coll::Broadcast, 6, hocclFloat, hocclSum, 0)},
      {"small: all-reduce vs a broadcast rank 0 roots", makeCall(Coll::AllReduce, 6, hocclFloat),
       makeCall(Coll::Broadcast, 6, hocclFloat, hocclSum, 0)},
      {"single copy: counts 100003 vs 100004", makeCall(Coll::AllReduce, 100003, hocclFloat),
       makeCall(Coll::AllReduce, 100004, hocclFloat), true, true},
      {"single copy: all-reduce vs reduce-scatter", makeCall(Coll::AllReduce, 100003, hocclFloat),
       makeCall(Coll::ReduceScatter, 100003, hocclFloat), true, true},
      {"single copy: all-gather float vs int32", makeCall(Coll::AllGather, 50001, hocclFloat),
       makeCall(Coll::AllGather, 50001, hocclInt32), true, true},
      {"single copy: broadcast, each rank the root of its own call",
       makeCall(Coll::Broadcast, 70001, hocclFloat, hocclSum, 0),
       makeCall(Coll::Broadcast, 70001, hocclFloat, hocclSum, 1), true, true},
      {"small vs single copy: all-reduce 8 vs 100003", makeCall(Coll::AllReduce, 8, hocclFloat),
       makeCall(Coll::AllReduce, 100003, hocclFloat), false, true},
  };
  for (int n : {2, 3}) {
    for (const Pair& pr : pairs) {
      if (pr.only2 && n != 2) continue;
      DYNAMIC_SECTION(n << " ranks, " << pr.label) {
        auto ranks = connectThreads(n);
        std::vector<CollCall> calls(n, pr.b);
        calls[0] = pr.a;
        std::vector<bool> copy(n, pr.copyB);
        copy[0] = pr.copyA;
        auto out = runMismatch(ranks, calls, copy);
        expectMismatchError(out[0], 0, pr.a, pr.b);
        for (int r = 1; r < n; ++r) expectMismatchError(out[r], r, pr.b, pr.a);
      }
    }
  }
}

// KNOWN GAP (reported, not fixed here: library code is not ours): a rank that waits for nobody — a broadcast root
// and a reduce contributor of the small shortcut (shm_small.cc, SmallOp::waitsForAll/waitsFor, passed to Exchange
// as needsAll=false/only=-1) — publishes and returns hocclSuccess without reading any peer's stamp, so it never
// learns that the others made another call. Exchange::poll (shm_session.cc) compares stamps only for the peers it
// needs. The waiting ranks do fail, naming both calls, and nothing is written; but the silent rank succeeds. Tagged
// [!mayfail]: the strict expectation (every rank fails) is checked and reported, without failing the run.
TEST_CASE("mismatched calls where a rank waits for nobody (known gap: that rank succeeds)",
          "[shortcuts][mismatch][!mayfail]") {
  struct Pair {
    const char* label;
    CollCall a, b;
    bool bothSilent;  // neither rank waits for the other
  };
  const Pair pairs[] = {
      {"reduce root 0: counts 5 (rank 0, the root) vs 6 (rank 1, contributor)",
       makeCall(Coll::Reduce, 5, hocclFloat, hocclSum, 0), makeCall(Coll::Reduce, 6, hocclFloat, hocclSum, 0), false},
      {"all-reduce (rank 0) vs broadcast rooted at rank 1 (rank 1)", makeCall(Coll::AllReduce, 6, hocclFloat),
       makeCall(Coll::Broadcast, 6, hocclFloat, hocclSum, 1), false},
      {"broadcast: each rank the root of its own call", makeCall(Coll::Broadcast, 6, hocclFloat, hocclSum, 0),
       makeCall(Coll::Broadcast, 6, hocclFloat, hocclSum, 1), true},
  };
  for (const Pair& pr : pairs) {
    DYNAMIC_SECTION(pr.label) {
      auto ranks = connectThreads(2);
      std::vector<Prepared> p(2);
      std::vector<std::unique_ptr<ShortcutOp>> ops(2);
      const CollCall calls[2] = {pr.a, pr.b};
      for (int r = 0; r < 2; ++r) {
        prepare(p[r], calls[r], r, 2, false, inputOf(r + 1, r, calls[r], 2));
        ops[r] = ranks[r]->small->start(p[r].call);
      }
      auto out = driveAll({ops[0].get(), ops[1].get()});
      if (!pr.bothSilent) expectMismatchError(out[0], 0, pr.a, pr.b);  // the waiting rank: detects, writes nothing
      if (!pr.bothSilent) CHECK(p[0].recv.untouched());
      WARN("KNOWN GAP " << pr.label << ": rank 0 " << (out[0].threw ? "failed: " + out[0].what : "succeeded")
                        << "; rank 1 " << (out[1].threw ? "failed: " + out[1].what : "succeeded"));
      CHECK(out[1].threw);  // the strict expectation: fails today
      if (pr.bothSilent) CHECK(out[0].threw);
    }
  }
}

// ==================================================================================================================
// Single copy's range check against a peer's published buffer sizes

namespace {

/// What SingleCopyOp publishes in its address round (shm_single_copy.cc, Buffers; private there, so its layout is
/// repeated here — the control case below proves it matches). The shared descriptors stay "not registered" (fd -1).
struct PublishedBuffers {
  uint64_t send, recv, sendBytes, recvBytes;
  shm::SharedDesc sendShared, recvShared;
};

}  // namespace

// Through the public path a peer cannot publish a short buffer for a matching call: both sizes are computed from the
// call (inputBytes/outputBytes of shortcut.cc), and every field they depend on (collective, type, count) is in the
// stamp that must match first. So rank 0 here is a forger: it runs the real address round (shm::Exchange, the
// right stamp) with a payload of its own, and rank 1 runs the real single-copy op against it.
TEST_CASE("single copy: a peer publishing a buffer smaller than the call needs is refused before any copy",
          "[shortcuts][copy][ranges]") {
  const size_t count = 1001;  // odd: rank 1's all-reduce block is [500, 1001)
  struct Forge {
    const char* label;
    CollCall call;
    int64_t sendDelta, recvDelta;  // bytes added to what the forger's buffers should be
    bool nullRecv;
    const char* expect;  // "" = the control case: must complete and be right
  };
  const Forge forges[] = {
      {"control: honest sizes, all-reduce", makeCall(Coll::AllReduce, count, hocclFloat), 0, 0, false, ""},
      {"control: honest sizes, broadcast rooted at the forger",
       makeCall(Coll::Broadcast, count, hocclFloat, hocclSum, 0), 0, 0, false, ""},
      {"all-reduce, send one element short", makeCall(Coll::AllReduce, count, hocclFloat), -4, 0, false, "would read"},
      {"all-reduce, receive one byte short", makeCall(Coll::AllReduce, count, hocclFloat), 0, -1, false, "would write"},
      {"all-reduce, no receive buffer", makeCall(Coll::AllReduce, count, hocclFloat), 0, 0, true, "would write"},
      {"all-gather, send one element short", makeCall(Coll::AllGather, count, hocclFloat), -4, 0, false, "would read"},
      {"reduce-scatter, send one byte short", makeCall(Coll::ReduceScatter, count, hocclFloat), -1, 0, false,
       "would read"},
      {"broadcast rooted at the forger, send short", makeCall(Coll::Broadcast, count, hocclFloat, hocclSum, 0), -4, 0,
       false, "would read"},
      {"broadcast rooted at rank 1, the forger's receive short",
       makeCall(Coll::Broadcast, count, hocclFloat, hocclSum, 1), 0, -4, false, "would write"},
  };
  for (const Forge& f : forges) {
    DYNAMIC_SECTION(f.label) {
      auto ranks = connectThreads(2);
      REQUIRE(bool(ranks[1]->copy));
      const int n = 2;
      std::vector<std::vector<double>> in{inputOf(9, 0, f.call, n), inputOf(9, 1, f.call, n)};
      Prepared forger, real;
      prepare(forger, f.call, 0, n, false, in[0]);
      prepare(real, f.call, 1, n, false, in[1]);
      const std::vector<unsigned char> forgerSend = forger.send.raw, realSend = real.send.raw;
      PublishedBuffers pub{reinterpret_cast<uint64_t>(forger.send.data()),
                           f.nullRecv ? 0 : reinterpret_cast<uint64_t>(forger.recv.data()),
                           static_cast<uint64_t>(static_cast<int64_t>(inputBytes(f.call, n)) + f.sendDelta),
                           static_cast<uint64_t>(static_cast<int64_t>(outputBytes(f.call, n)) + f.recvDelta)};
      shm::Exchange addresses(*ranks[0]->session, forger.call, shm::Protocol::CopyAddresses, &pub, sizeof(pub), true);
      REQUIRE_FALSE(addresses.poll());  // published; waits for rank 1
      auto op = ranks[1]->copy->start(real.call);
      if (*f.expect == '\0') {
        // Control: honest sizes. Rank 1 reads the forger's input and writes its output at the published addresses,
        // and its result is right: the forged payload is laid out as SingleCopyOp reads it. The forger plays the
        // rest of rank 0's part by hand.
        bool done = false;
        REQUIRE_NOTHROW(done = op->poll());
        REQUIRE_FALSE(done);  // rank 1 copied its part and waits in the closing round
        REQUIRE(addresses.poll());
        // Rank 0's own share of the work, done by hand: its block of the all-reduce, its copy of a broadcast root.
        if (f.call.coll == Coll::AllReduce) {
          std::vector<double> want = reference(f.call, 0, n, in);
          std::vector<double> half(want.begin(), want.begin() + count / 2);
          test::store(half, forger.recv.data(), hocclFloat);
          test::store(half, real.recv.data(), hocclFloat);  // what rank 0 would push into rank 1
        }
        shm::Exchange done2(*ranks[0]->session, forger.call, shm::Protocol::CopyDone, nullptr, 0, true);
        REQUIRE(done2.poll());  // rank 1 closed its round already
        REQUIRE(driveAll({op.get()})[0].done);
        const std::string bad = verify(real, 1, n, in);
        INFO(bad);
        CHECK(bad.empty());
        if (f.call.coll == Coll::AllReduce) {  // rank 1 pushed its finished block into the forger's output
          std::vector<double> want = reference(f.call, 0, n, in);
          std::vector<double> got = test::load(forger.recv.data(), count, hocclFloat);
          CHECK(got == want);
        }
        continue;
      }
      try {
        op->poll();
        FAIL("rank 1 accepted a peer range outside the published buffer");
      } catch (const Error& e) {
        INFO(e.what());
        CHECK(e.code() == hocclInvalidUsage);
        CHECK(std::string(e.what()).find(f.expect) != std::string::npos);
        CHECK(std::string(e.what()).find("rank 0 (host testhost") != std::string::npos);
        CHECK(std::string(e.what()).find("Nothing was copied") != std::string::npos);
      }
      CHECK(real.recv.untouched());
      CHECK(real.send.raw == realSend);
      CHECK(forger.recv.untouched());
      CHECK(forger.send.raw == forgerSend);
    }
  }
}

// ==================================================================================================================
// ncclGroupSimulateEnd prices what runs

TEST_CASE("groupSimulatedSeconds (ncclGroupSimulateEnd) of a one-host all-reduce equals the prediction of what runs",
          "[shortcuts][simulate][fork]") {
  hocclUniqueId uid;
  REQUIRE(hocclGetUniqueId(&uid) == hocclSuccess);
  auto results = runProcesses(2, [&](int r) -> std::string {
    hocclComm_t comm = nullptr;
    if (hocclCommInitRank(&comm, 2, uid, r) != hocclSuccess) return std::string("init: ") + hocclGetLastError(nullptr);
    Communicator& c = *comm->impl;
    bool cross = false;
    for (const auto& s : c.shortcuts()) cross |= std::string(s->name()) == "single_copy";
    std::string problems;
    for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{16} << 20}) {
      const size_t count = bytes / sizeof(float);
      std::vector<float> send(count), recv(count, -7.0f);
      for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((i * 7 + static_cast<size_t>(r) * 3) % 64);
      if (hocclGroupStart() != hocclSuccess) return "group start";
      if (hocclAllReduce(send.data(), recv.data(), count, hocclFloat, hocclSum, comm, nullptr) != hocclSuccess)
        return std::string("recording: ") + hocclGetLastError(nullptr);
      const float simulated = groupSimulatedSeconds();
      groupDiscard();
      if (recv[0] != -7.0f) problems += "; the simulated group ran";
      // The same call as the C API edge resolves it (the chunk count is the planner's), and the tuner's choice.
      Op op;
      op.comm = &c;
      op.coll = Coll::AllReduce;
      op.sendbuf = send.data();
      op.recvbuf = recv.data();
      op.count = count;
      op.dtype = hocclFloat;
      op.op = hocclSum;
      const Resolved res = resolve(op);
      const topo::LinkModel model = c.tuningModel();  // what the communicator's tuner prices with
      const algo::Choice choice = algo::decide(res.call, res.args, c.topology(), sizeof(float), c.shortcuts(), &model);
      // 1 MiB of ordinary buffers: a schedule (single copy through the kernel is not chosen below 4 MiB,
      // SingleCopyShortcut::choosableOnOrdinaryBuffers), with single copy where every rank registered (over mappings
      // it is faster: LinkModel::mappedCopy). 16 MiB: single copy through the kernel (LinkModel::kernelCopy), where
      // the arena permits it, unless the 64 MiB of the two ranks' buffers take over half the host's last-level cache
      // and the model has the host's caches (tuningModel, from hwloc): then HO-Ring, whose pieces in cache-sized
      // chunks are sent on while still in the cache (LinkModel::streamedBytes).
      // HO-Ring's 256 KiB chunks need a rank's share of L2 of 512 KiB (parts of 128 KiB, with the room
      // streamedBytes asks); with a smaller share the 16 MiB choice depends on the sizes, and is not asked.
      const double share = model.forCall(4.0 * static_cast<double>(bytes)).crowded(2).cacheBytes;
      const bool large = bytes == (size_t{16} << 20), unsure = large && share > 0 && share < 512 * 1024;
      const char* want = bytes == 8                          ? "small"
                         : large && share >= 512 * 1024      ? "ho_ring"
                         : large && share == 0 && cross      ? "single_copy"
                                                             : nullptr;
      double predicted = 0;
      if (choice.shortcut) predicted = choice.shortcut->predictSeconds(res.call, model);
      else predicted = algo::predict(*choice.algorithm, res.args, c.topology(), sizeof(float), model).seconds;
      if (want && std::string(choice.name()) != want)
        problems += fmt::format("; {} B: the tuner chose {}, expected {}", bytes, choice.name(), want);
      if (!unsure && (!want || !std::strcmp(want, "ho_ring")) && choice.shortcut)
        problems += fmt::format("; {} B: {} was chosen for ordinary buffers, expected a schedule", bytes,
                                choice.name());
      if (bytes == (size_t{1} << 20) && cross &&
          (!choice.ifRegistered || std::string(choice.ifRegistered->name()) != "single_copy"))
        problems += fmt::format("; {} B: {} without single copy for registered buffers", bytes, choice.name());
      // What actually runs is the communicator's cached decision for the call (runFastPath / planTasks).
      if (res.decision->choice.shortcut != choice.shortcut || res.decision->choice.algorithm != choice.algorithm)
        problems += fmt::format("; {} B: the communicator runs {}, the tuner says {}", bytes,
                                res.decision->choice.name(), choice.name());
      if (simulated != static_cast<float>(predicted))
        problems += fmt::format("; {} B: simulated {:.9g} s, {} predicts {:.9g} s", bytes, simulated, choice.name(),
                                predicted);
      if (r == 0)
        std::printf("%zu B all-reduce on 2 ranks of one host: %s, simulated %.3f us, predicted %.3f us%s\n", bytes,
                    choice.name(), simulated * 1e6, predicted * 1e6,
                    !want && !cross ? " (single copy not permitted here: arena crossMemory() is false)" : "");
      // And it runs as predicted: the right sum.
      if (hocclAllReduce(send.data(), recv.data(), count, hocclFloat, hocclSum, comm, nullptr) != hocclSuccess)
        return std::string("running: ") + hocclGetLastError(nullptr);
      for (size_t i = 0; i < count; ++i) {
        const float expect = static_cast<float>((i * 7) % 64 + (i * 7 + 3) % 64);
        if (recv[i] != expect) {
          problems += fmt::format("; {} B: element {} is {}, expected {}", bytes, i, recv[i], expect);
          break;
        }
      }
    }
    hocclCommDestroy(comm);
    return problems;
  });
  INFO(firstError(results));
  CHECK(firstError(results).empty());
}
