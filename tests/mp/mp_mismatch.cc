// Mismatched collective calls (issue 15) on N real processes of one host, default settings, HOCCL_TIMEOUT=5: the
// even ranks make one call, the odd ranks another. For each case every rank must return an error (never success),
// no rank may write outside its buffers (guard bytes before and after every buffer), and a rank that detects the
// mismatch (hocclInvalidUsage) names both calls and has written nothing, not even inside its output. Every case
// ends within HOCCL_TIMEOUT plus a margin. Each case runs on a fresh communicator, which every rank then aborts.
//
// Cases that today's code cannot fail cleanly (see kKnownGaps) run only with --known-gaps and only report what
// happens; they do not decide the exit code.
//
// Usage: mp_mismatch --ranks N [--known-gaps]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "kernels/cpu/reduce.h"
#include "transports/shortcut.h"

using namespace hoccl;
using namespace hoccl::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kTimeoutSeconds = 5;
constexpr size_t kGuardBytes = 4096;
constexpr unsigned char kCanary = 0xA5;

/// One side of a mismatch.
struct Call {
  Coll coll;
  size_t count;  // as the C API takes it
  hocclDataType_t dt = hocclFloat;
  hocclRedOp_t op = hocclSum;
  int root = 0;
};

/// Even ranks call a, odd ranks b.
struct Case {
  const char* name;
  Call a, b;
};

const Case kCases[] = {
    {"all-reduce 100,000 vs 200,000 floats (single copy)", {Coll::AllReduce, 100000}, {Coll::AllReduce, 200000}},
    {"all-reduce 100 vs 200 floats (small one-shot)", {Coll::AllReduce, 100}, {Coll::AllReduce, 200}},
    {"all-reduce vs broadcast rooted at rank 0, 100 floats", {Coll::AllReduce, 100}, {Coll::Broadcast, 100}},
    {"all-reduce vs reduce-scatter, 100 floats", {Coll::AllReduce, 100}, {Coll::ReduceScatter, 100}},
    {"all-gather 100 vs 200 floats", {Coll::AllGather, 100}, {Coll::AllGather, 200}},
    {"all-reduce vs broadcast rooted at rank 0, 100,000 floats", {Coll::AllReduce, 100000}, {Coll::Broadcast, 100000}},
    {"all-reduce vs reduce-scatter, 100,000 floats", {Coll::AllReduce, 100000}, {Coll::ReduceScatter, 100000}},
    {"all-gather 50,000 vs 100,000 floats", {Coll::AllGather, 50000}, {Coll::AllGather, 100000}},
    {"all-reduce float vs int32, 100 elements", {Coll::AllReduce, 100}, {Coll::AllReduce, 100, hocclInt32}},
    {"all-reduce 8 floats (small) vs 100,000 floats (single copy)", {Coll::AllReduce, 8}, {Coll::AllReduce, 100000}},
};

// KNOWN GAPS: mismatches that today's code does not turn into a clean error on every rank (reported, not fixed
// here; run them with --known-gaps):
//  - a rank that waits for nobody in the small one-shot shortcut (a broadcast root, a reduce contributor) publishes
//    and returns hocclSuccess without reading anybody's call stamp (transports/shm/shm_small.cc,
//    SmallOp::waitsForAll / waitsFor -> Exchange(needsAll=false, only=-1); Exchange::poll in shm_session.cc checks
//    the stamps of needed peers only). Broadcasts with different roots: every rank succeeds;
//  - one side on a shortcut, the other on a schedule over the slot channels: algo::decide (src/algo/tuner.cc)
//    decides per call, from canRun's size limits (shm_small.cc: payload <= min(arena, 2 KiB x ranks);
//    shm_single_copy.cc: >= 32/128/256 KiB), so two counts either side of a limit, or a call no shortcut takes
//    (all-to-all, PreMulSum), never meet: both sides time out after HOCCL_TIMEOUT, and neither names the other
//    call; the root's verdict (base/boot/root_server.cc, Verdict::Kind::Stalled) then tells the shortcut side that
//    it "stopped taking part" itself;
//  - both sides on schedules: the shm channel notices the size difference at once but throws hocclInternalError
//    ("please report this issue", transports/shm/shm_channel.cc, "message size mismatch") naming the peer, not
//    its call; the others get hocclRemoteError blaming a rank that "stopped taking part".
const Case kKnownGaps[] = {
    {"all-reduce vs broadcast rooted at rank 1 (rank 1 is a root that waits for nobody), 100 floats",
     {Coll::AllReduce, 100},
     {Coll::Broadcast, 100, hocclFloat, hocclSum, 1}},
    {"reduce rooted at rank 0, 100 vs 200 floats (odd ranks are contributors that wait for nobody)",
     {Coll::Reduce, 100},
     {Coll::Reduce, 200}},
    {"broadcast rooted at rank 0 vs rooted at rank 1, 100 floats",
     {Coll::Broadcast, 100},
     {Coll::Broadcast, 100, hocclFloat, hocclSum, 1}},
    {"all-reduce (small one-shot) vs all-to-all (schedule), 100 floats", {Coll::AllReduce, 100}, {Coll::AlltoAll, 100}},
    {"all-reduce 1,000 vs 1,500 floats (small one-shot vs schedule at 2 ranks)",
     {Coll::AllReduce, 1000},
     {Coll::AllReduce, 1500}},
    {"all-reduce 50,000 vs 100,000 floats (schedule vs single copy)",
     {Coll::AllReduce, 50000},
     {Coll::AllReduce, 100000}},
    {"all-reduce 10,000 vs 20,000 floats (schedule vs schedule)", {Coll::AllReduce, 10000}, {Coll::AllReduce, 20000}},
    {"all-gather 1,000 vs 2,000 floats (small one-shot vs schedule at 2 ranks)",
     {Coll::AllGather, 1000},
     {Coll::AllGather, 2000}},
};

transport::CollCall collCall(const Call& c) {
  transport::CollCall t;
  t.coll = c.coll;
  t.count = c.count;
  t.dtype = c.dt;
  t.op = c.op;
  t.root = c.root;
  return t;
}

/// A buffer with guard bytes before and after, all canary until written.
struct Guarded {
  std::vector<unsigned char> raw;
  size_t bytes;
  explicit Guarded(size_t n) : raw(n + 2 * kGuardBytes, kCanary), bytes(n) {}
  unsigned char* data() { return raw.data() + kGuardBytes; }
  bool guardsIntact() const {
    for (size_t i = 0; i < kGuardBytes; ++i)
      if (raw[i] != kCanary || raw[kGuardBytes + bytes + i] != kCanary) return false;
    return true;
  }
  bool untouched() const {
    for (unsigned char c : raw)
      if (c != kCanary) return false;
    return true;
  }
};

hocclResult_t issue(const Call& c, const void* send, void* recv, hocclComm_t comm) {
  switch (c.coll) {
    case Coll::AllReduce: return hocclAllReduce(send, recv, c.count, c.dt, c.op, comm, nullptr);
    case Coll::Broadcast: return hocclBroadcast(send, recv, c.count, c.dt, c.root, comm, nullptr);
    case Coll::Reduce: return hocclReduce(send, recv, c.count, c.dt, c.op, c.root, comm, nullptr);
    case Coll::AllGather: return hocclAllGather(send, recv, c.count, c.dt, comm, nullptr);
    case Coll::ReduceScatter: return hocclReduceScatter(send, recv, c.count, c.dt, c.op, comm, nullptr);
    case Coll::AlltoAll: return hocclAlltoAll(send, recv, c.count, c.dt, comm, nullptr);
    default: return hocclInternalError;
  }
}

/// One rank of one case; returns its exit code. `strict`: failures count (else only reported).
int runCase(int rank, int n, const hocclUniqueId& id, const Case& cs, bool strict) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  const Call& mine = rank % 2 == 0 ? cs.a : cs.b;
  const Call& other = rank % 2 == 0 ? cs.b : cs.a;
  const transport::CollCall tc = collCall(mine);
  const size_t elem = kernels::typeSize(mine.dt);
  Guarded send(transport::inputBytes(tc, n)), recv(transport::outputBytes(tc, n));
  for (size_t i = 0; i < send.bytes / elem; ++i) {  // small values, valid in any type
    const double v = static_cast<double>((i * 13 + static_cast<size_t>(rank) * 7) % 17);
    kernels::fromDouble(v, send.data() + i * elem, mine.dt);
  }
  const std::vector<unsigned char> sendBefore = send.raw;
  const auto start = Clock::now();
  const hocclResult_t rc = issue(mine, send.data(), recv.data(), comm);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string msg = rc == hocclSuccess ? std::string() : hocclGetLastError(nullptr);
  std::printf("[rank %d] %s: %s after %.2f s%s%s\n", rank, transport::describeCall(tc).c_str(), hocclGetErrorString(rc),
              seconds, msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stdout);
  std::string problems;
  if (rc == hocclSuccess) problems += "; returned success";
  if (!send.guardsIntact() || !recv.guardsIntact()) problems += "; wrote outside its buffers";
  if (send.raw != sendBefore) problems += "; changed its input";
  if (seconds > kTimeoutSeconds + 3) problems += "; took longer than HOCCL_TIMEOUT + 3 s";
  if (rc == hocclInvalidUsage) {  // it detected the mismatch: both calls named, nothing written
    const std::string a = transport::describeCall(tc), b = transport::describeCall(collCall(other));
    if (msg.find(a) == std::string::npos || msg.find(b) == std::string::npos)
      problems += "; its message does not name both calls (" + a + " and " + b + ")";
    if (!recv.untouched()) problems += "; says nothing was written, but its output changed";
  }
  hocclCommAbort(comm);
  if (problems.empty()) return 0;
  if (!strict) {
    std::printf("[rank %d] KNOWN GAP %s: %s\n", rank, cs.name, problems.c_str() + 2);
    return 0;
  }
  return fail(rank, std::string(cs.name) + ": " + problems.substr(2));
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 2;
  bool gaps = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) nranks = std::atoi(argv[++i]);
    else if (a == "--known-gaps") gaps = true;
  }
  setenv("HOCCL_TIMEOUT", std::to_string(kTimeoutSeconds).c_str(), 1);
  for (const char* v : {"HOCCL_SHM_DISABLE", "HOCCL_ALGO", "HOCCL_SMALL_MAX_BYTES", "HOCCL_CMA_MIN_BYTES"}) unsetenv(v);
  int bad = 0;
  auto run = [&](const Case& cs, bool strict) {
    std::printf("== %d ranks: %s%s\n", nranks, cs.name, strict ? "" : " (known gap: reported only)");
    std::fflush(stdout);
    const auto start = Clock::now();
    int rc = runRanks(
        nranks, [&](int r, int n, const hocclUniqueId& id) { return runCase(r, n, id, cs, strict); },
        kTimeoutSeconds * 4);
    std::printf("== %s: %s (%.1f s)\n", cs.name, rc == 0 ? "ok" : "FAIL",
                std::chrono::duration<double>(Clock::now() - start).count());
    if (rc != 0 && strict) bad = rc;
  };
  for (const Case& cs : kCases) run(cs, true);
  if (gaps)
    for (const Case& cs : kKnownGaps) run(cs, false);
  std::printf("mp_mismatch: %d ranks: %s\n", nranks, bad == 0 ? "PASS" : "FAIL");
  return bad == 0 ? 0 : 1;
}
