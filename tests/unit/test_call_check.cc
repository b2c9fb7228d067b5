// The mismatch check's doubling exchange (src/comm/call_check.h, HOCCL_CHECK_EXCHANGE):
//  - combine() against a brute-force reference over random sets of ranks (overlapping, in any order): the lowest rank
//    and the lowest rank whose fingerprint differs from it;
//  - the rounds as call_check.cc runs them (rank r combines with r - 2^k), simulated for 1..70 ranks with random
//    fingerprints: every rank must end with the reference's pair; and the peers each rank connects are symmetric;
//  - thread ranks through the public API, 2, 3 and 5 ranks, over shm and tcp, lazy and eager connections, both
//    exchanges: one middle rank or the last rank calls something else (so the differing pairs are the middle ones,
//    or the last and the first); every rank must fail with hocclInvalidUsage naming both calls, and a matching
//    all-reduce afterwards must give the right sum (the channels stayed in step).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/call_check.h"
#include "hoccl/hoccl.h"
#include "rank_runner.h"
#include "scoped_env.h"

using namespace hoccl;
using hoccl::test::allErrors;
using hoccl::test::runThreads;
using hoccl::test::ScopedEnv;

namespace {

// One of `kinds` distinct fingerprints.
CallFingerprint fingerprint(int kind) {
  CallFingerprint f;
  f.count = 100 + static_cast<uint64_t>(kind);
  f.coll = static_cast<uint8_t>(Coll::AllReduce);
  return f;
}

// The reference: over the ranks of `set` (fingerprints `fps`), the lowest rank and the lowest whose call differs.
std::pair<int, int> reference(const std::set<int>& set, const std::vector<int>& fps) {
  if (set.empty()) return {-1, -1};
  const int low = *set.begin();
  for (int r : set)
    if (fps[static_cast<size_t>(r)] != fps[static_cast<size_t>(low)]) return {low, r};
  return {low, -1};
}

// Random kinds: mostly one call, with a few ranks (or none) calling others.
std::vector<int> randomKinds(int n, std::mt19937& rng) {
  std::vector<int> fps(static_cast<size_t>(n), 0);
  const int odd = std::uniform_int_distribution<int>(0, 3)(rng);
  for (int i = 0; i < odd; ++i)
    fps[static_cast<size_t>(std::uniform_int_distribution<int>(0, n - 1)(rng))] = std::uniform_int_distribution<int>(1,
                                                                                                                     3)(
        rng);
  if (rng() % 5 == 0)  // sometimes every rank random
    for (int& f : fps) f = std::uniform_int_distribution<int>(0, 2)(rng);
  return fps;
}

}  // namespace

TEST_CASE("combine: the lowest rank and the lowest rank that differs, over unions of overlapping sets") {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 24)(rng);
    const std::vector<int> fps = randomKinds(n, rng);
    // A few random subsets, combined one after another in random order; each may overlap the ones before.
    CheckSummary acc;
    std::set<int> covered;
    const int parts = std::uniform_int_distribution<int>(1, 5)(rng);
    for (int p = 0; p < parts; ++p) {
      CheckSummary part;
      std::set<int> members;
      for (int r = 0; r < n; ++r)
        if (rng() % 3 == 0) {
          part = combine(part, summaryOf(r, fingerprint(fps[static_cast<size_t>(r)])));
          members.insert(r);
        }
      const auto want = reference(members, fps);
      REQUIRE(part.lowRank == want.first);
      REQUIRE(part.otherRank == want.second);
      acc = rng() % 2 ? combine(acc, part) : combine(part, acc);
      covered.insert(members.begin(), members.end());
      const auto wantAll = reference(covered, fps);
      INFO("trial " << trial << ", n " << n << ", part " << p);
      REQUIRE(acc.lowRank == wantAll.first);
      REQUIRE(acc.otherRank == wantAll.second);
      if (acc.lowRank >= 0) CHECK(acc.low.count == fingerprint(fps[static_cast<size_t>(acc.lowRank)]).count);
      if (acc.otherRank >= 0) CHECK(acc.other.count == fingerprint(fps[static_cast<size_t>(acc.otherRank)]).count);
    }
  }
}

TEST_CASE("the doubling rounds give every rank the same pair, for 1..70 ranks; their peers are symmetric") {
  std::mt19937 rng(5);
  for (int n = 1; n <= 70; ++n) {
    for (int trial = 0; trial < 30; ++trial) {
      const std::vector<int> fps = randomKinds(n, rng);
      std::vector<CheckSummary> s(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) s[static_cast<size_t>(r)] = summaryOf(r, fingerprint(fps[static_cast<size_t>(r)]));
      int rounds = 0;
      for (int d = 1; d < n; d *= 2, ++rounds) {  // round k: rank r receives what r - 2^k held before the round
        const std::vector<CheckSummary> before = s;
        for (int r = 0; r < n; ++r)
          s[static_cast<size_t>(r)] = combine(before[static_cast<size_t>(r)],
                                              before[static_cast<size_t>((r - d + n) % n)]);
      }
      std::set<int> all;
      for (int r = 0; r < n; ++r) all.insert(r);
      const auto want = reference(all, fps);
      for (int r = 0; r < n; ++r) {
        INFO("n " << n << " trial " << trial << " rank " << r);
        REQUIRE(s[static_cast<size_t>(r)].lowRank == want.first);
        REQUIRE(s[static_cast<size_t>(r)].otherRank == want.second);
      }
      if (trial == 0) {
        for (int r = 0; r < n; ++r) {
          const std::vector<int> peers = doublingCheckPeers(r, n);
          CHECK(static_cast<int>(peers.size()) <= 2 * rounds);
          CHECK(std::find(peers.begin(), peers.end(), r) == peers.end());
          for (int p : peers) {
            const std::vector<int> back = doublingCheckPeers(p, n);
            INFO("n " << n << ": rank " << r << " lists " << p << " but not the reverse");
            CHECK(std::find(back.begin(), back.end(), r) != back.end());
          }
        }
      }
    }
  }
}

TEST_CASE("thread ranks: one middle rank or the last rank calls something else; every rank names both calls") {
  const int n = GENERATE(2, 3, 5);
  const std::string where = GENERATE("middle", "last");
  const std::string transport = GENERATE("shm", "tcp");
  const std::string connect = GENERATE("lazy", "eager");
  const std::string exchange = GENERATE("auto", "all");
  ScopedEnv shm("HOCCL_SHM_DISABLE", transport == "tcp" ? "1" : "0");
  ScopedEnv conn("HOCCL_CONNECT", connect.c_str());
  ScopedEnv ex("HOCCL_CHECK_EXCHANGE", exchange.c_str());
  ScopedEnv timeout("HOCCL_TIMEOUT", "30");
  const int odd = where == "middle" ? n / 2 : n - 1;  // n = 2: rank 1 either way
  INFO(n << " ranks, rank " << odd << " (" << where << ") differs, " << transport << ", " << connect << ", "
         << exchange);
  hocclUniqueId id;
  REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
  const std::vector<std::string> errors = runThreads(n, [&](int r) {
    hocclComm_t comm = nullptr;
    if (hocclCommInitRank(&comm, n, id, r) != hocclSuccess)
      throw std::runtime_error(std::string("init: ") + hocclGetLastError(nullptr));
    std::string problem;
    // Everybody sums 3 doubles, rank `odd` 4: the first call of the communicator, so the default policy checks it.
    const size_t count = r == odd ? 4 : 3;
    std::vector<double> in(4, 1.0 + r), out(4, -1.0);
    const hocclResult_t rc = hocclAllReduce(in.data(), out.data(), count, hocclFloat64, hocclSum, comm, nullptr);
    const std::string msg = rc == hocclSuccess ? "" : hocclGetLastError(nullptr);
    if (rc != hocclInvalidUsage)
      problem += fmt::format("; returned {} ({}) instead of hocclInvalidUsage", hocclGetErrorString(rc), msg);
    for (const char* call : {"AllReduce(count=3, double, sum)", "AllReduce(count=4, double, sum)"})
      if (msg.find(call) == std::string::npos) problem += fmt::format("; its message does not name {}: {}", call, msg);
    if (out != std::vector<double>(4, -1.0)) problem += "; its output changed";
    if (rc == hocclInvalidUsage) {  // the channels are in step: a matching call works
      std::vector<int> one(5, r + 1), sum(5, 0);
      if (hocclAllReduce(one.data(), sum.data(), 5, hocclInt32, hocclSum, comm, nullptr) != hocclSuccess)
        problem += std::string("; a matching all-reduce afterwards failed: ") + hocclGetLastError(nullptr);
      else if (sum != std::vector<int>(5, n * (n + 1) / 2))
        problem += fmt::format("; a matching all-reduce afterwards gave {}", sum[0]);
    }
    if (problem.empty()) {
      hocclCommFinalize(comm);
      hocclCommDestroy(comm);
    } else {
      hocclCommAbort(comm);
      throw std::runtime_error(problem.substr(2));
    }
  });
  INFO(allErrors(errors));
  CHECK(allErrors(errors) == "");
}

TEST_CASE("a bad HOCCL_CHECK_EXCHANGE fails the call with the accepted values") {
  ScopedEnv ex("HOCCL_CHECK_EXCHANGE", "sometimes");
  ScopedEnv shm("HOCCL_SHM_DISABLE", "0");
  hocclUniqueId id;
  REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
  std::atomic<int> refused{0};
  std::atomic<int> returned{0};
  const std::vector<std::string> errors = runThreads(2, [&](int r) {
    hocclComm_t comm = nullptr;
    if (hocclCommInitRank(&comm, 2, id, r) != hocclSuccess) {
      ++returned;  // the other rank must not wait for this one
      throw std::runtime_error(std::string("init: ") + hocclGetLastError(nullptr));
    }
    double x = 1;
    if (hocclAllReduce(&x, &x, 1, hocclFloat64, hocclSum, comm, nullptr) == hocclInvalidArgument &&
        std::string(hocclGetLastError(nullptr)).find("expected auto, doubling or all") != std::string::npos)
      ++refused;
    // Abort only once both ranks are past init: init's last all-gather can return on rank 0 while rank 1 still
    // waits in it, and an abort then fails rank 1's init (correctly, naming rank 0), which is not what this tests.
    ++returned;
    while (returned < 2) std::this_thread::yield();
    hocclCommAbort(comm);
  });
  CHECK(allErrors(errors) == "");
  CHECK(refused == 2);
}
