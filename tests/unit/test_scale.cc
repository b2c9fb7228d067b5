// Lazy connections and many ranks (issue 19), through the public API with thread ranks:
//  - a ring all-reduce connects exactly the two ring neighbours, on the first call, and reuses them afterwards
//    (over tcp and over shm), plus the mismatch check's doubling peers unless HOCCL_CHECK_EXCHANGE=all; HOCCL_CONNECT=eager still connects everybody at init;
//  - send/recv between arbitrary pairs connect on first use: round k pairs rank r with r xor k, so after k rounds a
//    rank has exactly k peers; all-to-all then connects every peer; data checked against closed forms;
//  - a peer that never makes the call is named when the lazy connect gives up;
//  - 256 ranks (threads of this process) pass every collective on small counts over tcp and over shm, random
//    doubles against double-precision references, and send/recv between random pairs (all-to-all is left out here:
//    255 peers x 256 ranks of tcp sockets in one process); meson runs it as test_scale_big;
//  - splitShare: a split child (and a split of it) uses its owner's connections, so it connects nothing the owner
//    has; not shared unless every member asks or under HOCCL_MAX_CONNS; a group with both fails with a clear error;
//  - HOCCL_MAX_CONNS=2 or 3, over tcp and over shm: calls that touch many peers (send/recv between random pairs, ring all-reduces, an
//    all-to-all) stay correct while a rank holds few connections and the process few descriptors.
// A peer that dies before a lazy connect is tests/mp/mp_failures.cc's case "lazy".
#include <catch2/catch.hpp>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/call_check.h"
#include "comm/communicator.h"
#include "hoccl/hoccl.h"
#include "rank_runner.h"

using hoccl::test::firstError;
using hoccl::test::runThreads;

namespace {

#define CALL(expr)                                                                                         \
  do {                                                                                                     \
    hocclResult_t rc_ = (expr);                                                                            \
    if (rc_ != hocclSuccess)                                                                               \
      throw std::runtime_error(                                                                            \
          fmt::format("{} failed: {} ({})", #expr, hocclGetErrorString(rc_), hocclGetLastError(nullptr))); \
  } while (0)

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  using Vars = std::vector<std::pair<std::string, std::string>>;
  explicit ScopedEnv(Vars vars) {
    for (auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.push_back({k, old ? std::optional<std::string>(old) : std::nullopt});
      setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Runs body(rank, comm) on n thread ranks of one new communicator; "" when every rank succeeded.
std::string job(int n, const std::function<void(int, hocclComm_t)>& body) {
  hocclUniqueId id;
  if (hocclGetUniqueId(&id) != hocclSuccess) return "hocclGetUniqueId failed";
  return firstError(runThreads(n, [&](int r) {
    hocclComm_t comm = nullptr;
    CALL(hocclCommInitRank(&comm, n, id, r));
    try {
      body(r, comm);
    } catch (...) {
      hocclCommAbort(comm);
      throw;
    }
    CALL(hocclCommDestroy(comm));
  }));
}

int connectedPeers(hocclComm_t comm) { return comm->impl->connectedPeers(); }

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

std::vector<std::pair<std::string, std::string>> transportEnv(const std::string& transport) {
  return {{"HOCCL_SHM_DISABLE", transport == "tcp" ? "1" : "0"}};
}

}  // namespace

TEST_CASE("lazy: a ring all-reduce connects the two ring neighbours once and reuses them", "[scale]") {
  const std::string transport = GENERATE("tcp", "shm");
  // The mismatch check's doubling exchange connects its own peers r +- 2^k too; `all` goes round the ring, whose
  // peers are the all-reduce's, and so does `auto` with lazy connections above 4 ranks.
  const std::string exchange = GENERATE("doubling", "all", "auto");
  ScopedEnv env(transportEnv(transport));
  ScopedEnv algo({{"HOCCL_ALGO", "ring"}, {"HOCCL_CONNECT", "lazy"}, {"HOCCL_CHECK_EXCHANGE", exchange}});
  const int n = 8;
  std::string err = job(n, [&](int r, hocclComm_t comm) {
    expect(connectedPeers(comm) == 0, fmt::format("{} peers connected after a lazy init", connectedPeers(comm)));
    std::vector<int> peers = {(r + 1) % n, (r + n - 1) % n};
    if (exchange == "doubling")
      for (int p : hoccl::doublingCheckPeers(r, n))
        if (std::find(peers.begin(), peers.end(), p) == peers.end()) peers.push_back(p);
    const int want = static_cast<int>(peers.size());  // 2 with the ring; 5 with doubling: r +- 1, r +- 2, r + 4
    for (int call = 0; call < 20; ++call) {           // past the mismatch check's first 16 calls
      std::vector<int> buf(1000, r + call);
      CALL(hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclInt32, hocclSum, comm, nullptr));
      const int sum = n * (n - 1) / 2 + n * call;
      for (int v : buf) expect(v == sum, fmt::format("call {}: {} instead of {}", call, v, sum));
      expect(connectedPeers(comm) == want, fmt::format("call {}: {} peers connected, the ring and the check have {}",
                                                       call, connectedPeers(comm), want));
    }
  });
  INFO(transport << ", HOCCL_CHECK_EXCHANGE=" << exchange);
  CHECK(err == "");
}

TEST_CASE("lazy: the check's auto exchange goes round the ring above 4 ranks and doubles up to 4", "[scale]") {
  const std::string transport = GENERATE("tcp", "shm");
  const int n = GENERATE(4, 5, 12);
  ScopedEnv env(transportEnv(transport));
  ScopedEnv algo({{"HOCCL_ALGO", "ring"}, {"HOCCL_CONNECT", "lazy"}, {"HOCCL_CHECK_EXCHANGE", "auto"}});
  // Up to 4 lazy ranks the doubling rounds add r + 2 (= r - 2) to the ring's 2 neighbours; above, nothing.
  const int want = n <= 4 ? 3 : 2;
  std::string err = job(n, [&](int r, hocclComm_t comm) {
    for (int call = 0; call < 3; ++call) {  // checked calls (the first 16)
      std::vector<int> buf(100, r + call);
      CALL(hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclInt32, hocclSum, comm, nullptr));
      const int sum = n * (n - 1) / 2 + n * call;
      for (int v : buf) expect(v == sum, fmt::format("call {}: {} instead of {}", call, v, sum));
      expect(connectedPeers(comm) == want,
             fmt::format("call {}: {} peers connected, want {}", call, connectedPeers(comm), want));
    }
  });
  INFO(transport << ", " << n << " ranks");
  CHECK(err == "");
}

TEST_CASE("eager: every peer is connected at init", "[scale]") {
  ScopedEnv env({{"HOCCL_SHM_DISABLE", "1"}, {"HOCCL_CONNECT", "eager"}});
  std::string err = job(4, [&](int, hocclComm_t comm) {
    expect(connectedPeers(comm) == 3, fmt::format("{} peers connected after an eager init", connectedPeers(comm)));
  });
  CHECK(err == "");
}

TEST_CASE("a bad HOCCL_CONNECT fails init with the accepted values", "[scale]") {
  ScopedEnv env(ScopedEnv::Vars{{"HOCCL_CONNECT", "sometimes"}});
  hocclUniqueId id;
  REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
  hocclComm_t comm = nullptr;
  CHECK(hocclCommInitRank(&comm, 1, id, 0) == hocclInvalidArgument);
  CHECK(std::string(hocclGetLastError(nullptr)).find("expected lazy or eager") != std::string::npos);
}

TEST_CASE("lazy: send/recv between arbitrary pairs connect on first use, all-to-all connects everybody", "[scale]") {
  const std::string transport = GENERATE("tcp", "shm");
  ScopedEnv env(transportEnv(transport));
  ScopedEnv lazy(ScopedEnv::Vars{{"HOCCL_CONNECT", "lazy"}});
  const int n = 8;
  std::string err = job(n, [&](int r, hocclComm_t comm) {
    for (int k = 1; k < n; ++k) {  // round k: r <-> r xor k, a new peer every round
      const int peer = r ^ k;
      std::vector<double> out(100 + k, r * 1000.0 + k), in(100 + k, -1.0);
      CALL(hocclGroupStart());
      CALL(hocclSend(out.data(), out.size(), hocclFloat64, peer, comm, nullptr));
      CALL(hocclRecv(in.data(), in.size(), hocclFloat64, peer, comm, nullptr));
      CALL(hocclGroupEnd());
      for (double v : in) expect(v == peer * 1000.0 + k, fmt::format("round {}: got {} from rank {}", k, v, peer));
      expect(connectedPeers(comm) == k, fmt::format("round {}: {} peers connected", k, connectedPeers(comm)));
    }
    // Again, in reverse: nothing new to connect.
    for (int k = n - 1; k >= 1; --k) {
      const int peer = r ^ k;
      int out = r, in = -1;
      CALL(hocclGroupStart());
      CALL(hocclRecv(&in, 1, hocclInt32, peer, comm, nullptr));
      CALL(hocclSend(&out, 1, hocclInt32, peer, comm, nullptr));
      CALL(hocclGroupEnd());
      expect(in == peer, fmt::format("reverse round {}: got {} from rank {}", k, in, peer));
    }
    expect(connectedPeers(comm) == n - 1, "connections were not reused");
  });
  INFO(transport);
  CHECK(err == "");

  err = job(n, [&](int r, hocclComm_t comm) {
    std::vector<int> out(n * 3), in(n * 3, -1);
    for (int j = 0; j < n; ++j)
      for (int e = 0; e < 3; ++e) out[j * 3 + e] = r * 100 + j * 10 + e;
    CALL(hocclAlltoAll(out.data(), in.data(), 3, hocclInt32, comm, nullptr));
    for (int j = 0; j < n; ++j)
      for (int e = 0; e < 3; ++e)
        expect(in[j * 3 + e] == j * 100 + r * 10 + e, fmt::format("all-to-all: block {} element {}", j, e));
    expect(connectedPeers(comm) == n - 1, fmt::format("all-to-all left {} peers connected", connectedPeers(comm)));
  });
  CHECK(err == "");
}

namespace {

// Open descriptors of this process.
int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n - 3;  // ".", ".." and the directory's own descriptor
}

// Round k of the random pairing: ranks shuffled with seed k, neighbours in the shuffle paired (n even).
int partnerOf(int r, int n, int k) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(1000 + k);
  std::shuffle(order.begin(), order.end(), rng);
  const int at = static_cast<int>(std::find(order.begin(), order.end(), r) - order.begin());
  return order[at ^ 1];
}

// Rank r's random values for call k (any rank can compute any rank's: the reference needs them).
std::vector<float> valuesOf(int r, int k, size_t count) {
  std::mt19937 rng(static_cast<unsigned>(r * 7919 + k));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace

namespace {

// Rank r's random doubles for collective k (any rank can compute any rank's: the references need them).
std::vector<double> randomOf(int r, int k, size_t count) {
  std::mt19937_64 rng(static_cast<uint64_t>(r) * 1000003u + static_cast<uint64_t>(k));
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<double> v(count);
  for (double& x : v) x = d(rng);
  return v;
}

// |got - want| small against a sum of n terms of magnitude <= 1 (the order of the additions differs).
void near(double got, double want, int n, const std::string& what) {
  if (std::abs(got - want) > 1e-12 * n) throw std::runtime_error(fmt::format("{}: {} instead of {}", what, got, want));
}

}  // namespace

namespace {

void everyCollectiveOn256(const std::string& transport) {
  ScopedEnv env(transportEnv(transport));
  // HOCCL_ALGO=ring: above 64 ranks the tuner picks the direct algorithm for tiny all-gathers, which connects every
  // pair (256 x 255 tcp connections in this one process: past the open-files limit). The tuner does not yet weigh
  // the connections an algorithm opens; until it does, this test keeps to the schedules that scale. All-to-all is
  // left out for the same reason (it needs every pair); the small-rank tests above cover it.
  ScopedEnv lazy({{"HOCCL_CONNECT", "lazy"},
                  {"HOCCL_ALGO", "ring"},
                  {"HOCCL_TCP_CONNS", "1"},
                  {"HOCCL_SHM_SLOT_SIZE", "65536"},
                  {"HOCCL_SHM_SLOTS", "4"},
                  {"HOCCL_TIMEOUT", "120"}});
  const int n = 256;
  const size_t c = 3;  // odd
  // The references, in double precision from every rank's random values.
  auto sumOf = [&](int k, size_t count) {
    std::vector<double> s(count, 0.0);
    for (int q = 0; q < n; ++q) {
      std::vector<double> v = randomOf(q, k, count);
      for (size_t e = 0; e < count; ++e) s[e] += v[e];
    }
    return s;
  };
  const std::vector<double> sum1 = sumOf(1, c), sum5 = sumOf(5, c * n);
  std::vector<double> max3(c, -2.0);
  for (int q = 0; q < n; ++q) {
    std::vector<double> v = randomOf(q, 3, c);
    for (size_t e = 0; e < c; ++e) max3[e] = std::max(max3[e], v[e]);
  }
  std::string err = job(n, [&](int r, hocclComm_t comm) {
    std::vector<double> a = randomOf(r, 1, c), b(c, -9.0);
    CALL(hocclAllReduce(a.data(), b.data(), c, hocclFloat64, hocclSum, comm, nullptr));
    for (size_t e = 0; e < c; ++e) near(b[e], sum1[e], n, fmt::format("all-reduce element {}", e));
    CALL(hocclAllReduce(a.data(), a.data(), c, hocclFloat64, hocclSum, comm, nullptr));  // in place
    for (size_t e = 0; e < c; ++e) near(a[e], sum1[e], n, fmt::format("in-place all-reduce element {}", e));
    const std::vector<double> before = b;
    CALL(hocclAllReduce(a.data(), b.data(), 0, hocclFloat64, hocclSum, comm, nullptr));  // zero count
    expect(b == before, "a zero-count all-reduce changed its output buffer");

    std::vector<double> bc = r == 5 ? randomOf(5, 2, c) : std::vector<double>(c, 0.0);
    CALL(hocclBroadcast(bc.data(), bc.data(), c, hocclFloat64, 5, comm, nullptr));
    expect(bc == randomOf(5, 2, c), "broadcast");

    std::vector<double> mine3 = randomOf(r, 3, c), red(c, -9.0);
    CALL(hocclReduce(mine3.data(), red.data(), c, hocclFloat64, hocclMax, 3, comm, nullptr));
    if (r == 3) expect(red == max3, "reduce (max)");

    std::vector<double> mine4 = randomOf(r, 4, c), gathered(c * n, -9.0);
    CALL(hocclAllGather(mine4.data(), gathered.data(), c, hocclFloat64, comm, nullptr));
    for (int q = 0; q < n; ++q)
      expect(std::vector<double>(gathered.begin() + q * c, gathered.begin() + (q + 1) * c) == randomOf(q, 4, c),
             fmt::format("all-gather block {}", q));

    std::vector<double> rsIn = randomOf(r, 5, c * n), rsOut(c, -9.0);
    CALL(hocclReduceScatter(rsIn.data(), rsOut.data(), c, hocclFloat64, hocclSum, comm, nullptr));
    for (size_t e = 0; e < c; ++e) near(rsOut[e], sum5[r * c + e], n, fmt::format("reduce-scatter element {}", e));

    std::vector<double> g(c * n, -9.0);
    CALL(hocclGather(mine4.data(), g.data(), c, hocclFloat64, 7, comm, nullptr));
    if (r == 7) expect(g == gathered, "gather");

    std::vector<double> scIn = r == 9 ? randomOf(9, 6, c * n) : std::vector<double>(c * n, -2.0), sc(c, -9.0);
    CALL(hocclScatter(scIn.data(), sc.data(), c, hocclFloat64, 9, comm, nullptr));
    std::vector<double> all9 = randomOf(9, 6, c * n);
    expect(sc == std::vector<double>(all9.begin() + r * c, all9.begin() + (r + 1) * c), "scatter");

    // Send/recv between random pairs (a shuffle of the ranks, neighbours paired): connected on first use.
    const int peer = partnerOf(r, n, 7);
    std::vector<double> out = randomOf(r, 7, c), in(c, -9.0);
    CALL(hocclGroupStart());
    CALL(hocclSend(out.data(), c, hocclFloat64, peer, comm, nullptr));
    CALL(hocclRecv(in.data(), c, hocclFloat64, peer, comm, nullptr));
    CALL(hocclGroupEnd());
    expect(in == randomOf(peer, 7, c), fmt::format("send/recv with rank {}", peer));
  });
  INFO(transport);
  CHECK(err == "");
}

}  // namespace

// One test case per transport, so that meson runs each in its own bounded test (test_scale_big_tcp, _shm).
// A split with config.splitShare = 1 (or HOCCL_COMM_SPLIT_SHARE_RESOURCES=1) and every member agreeing: the child's
// channels are its owner's (comm/connection_share.cc); `share` -1 leaves config.splitShare unset.
hocclComm_t split(hocclComm_t parent, int color, int key, int share) {
  hocclConfig_t cfg = HOCCL_CONFIG_INITIALIZER;
  if (share >= 0) cfg.splitShare = share;
  hocclComm_t child = nullptr;
  CALL(hocclCommSplit(parent, color, key, &child, &cfg));
  return child;
}

// An all-reduce (sum) of random doubles on comm, checked against the double-precision sum of every rank's data,
// which each rank regenerates from the seeds (the parent's rank `who` of every member).
void checkedAllReduce(hocclComm_t comm, const std::vector<int>& members, int me, int call) {
  const size_t count = 1001;  // not a multiple of the ranks
  auto data = [&](int who) {
    std::mt19937_64 gen(static_cast<uint64_t>(who * 7919 + call));
    std::uniform_real_distribution<double> dist(-1, 1);
    std::vector<double> v(count);
    for (double& x : v) x = dist(gen);
    return v;
  };
  std::vector<double> buf = data(me), want(count, 0.0);
  for (int who : members) {
    std::vector<double> v = data(who);
    for (size_t i = 0; i < count; ++i) want[i] += v[i];
  }
  CALL(hocclAllReduce(buf.data(), buf.data(), count, hocclFloat64, hocclSum, comm, nullptr));
  for (size_t i = 0; i < count; ++i)
    expect(std::fabs(buf[i] - want[i]) <= 1e-12 * members.size(),
           fmt::format("call {}: element {} is {} instead of {}", call, i, buf[i], want[i]));
}

TEST_CASE("splitShare: a split child uses its owner's connections, and so does a split of the child", "[scale]") {
  const std::string transport = GENERATE("tcp", "shm");
  const std::string how = GENERATE("config", "environment");
  ScopedEnv env(transportEnv(transport));
  ScopedEnv algo({{"HOCCL_ALGO", "ring"},
                  {"HOCCL_CONNECT", "lazy"},
                  {"HOCCL_CHECK_EXCHANGE", "all"},
                  {"HOCCL_COMM_SPLIT_SHARE_RESOURCES", how == "environment" ? "1" : "0"}});
  const int n = 4, share = how == "config" ? 1 : -1;
  hocclUniqueId id;
  REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
  std::string err = firstError(runThreads(n, [&](int r) {
    hocclComm_t comm = nullptr, half = nullptr, reversed = nullptr, again = nullptr;
    try {
      CALL(hocclCommInitRank(&comm, n, id, r));
      checkedAllReduce(comm, {0, 1, 2, 3}, r, 0);
      expect(connectedPeers(comm) == 2, fmt::format("the parent's ring has {} peers, not 2", connectedPeers(comm)));
      // Colors r % 2: {0, 2} and {1, 3}. The child's one peer is the parent's r + 2, not connected yet.
      half = split(comm, r % 2, r, share);
      expect(half->impl->lender().owner == comm->impl, "the child does not borrow its parent's connections");
      expect(connectedPeers(half) == 0, "a borrowing child was connected before its first call");
      checkedAllReduce(half, {r % 2, r % 2 + 2}, r, 1);
      expect(connectedPeers(half) == 1 && connectedPeers(comm) == 3,
             fmt::format("after the child's call: child {} peers (want 1), parent {} (want 3: its ring and r + 2)",
                         connectedPeers(half), connectedPeers(comm)));
      // Everybody, in reverse order: its ring neighbours are the parent's, so nothing new is connected.
      reversed = split(comm, 0, n - r, share);
      checkedAllReduce(reversed, {0, 1, 2, 3}, r, 2);
      expect(connectedPeers(reversed) == 2 && connectedPeers(comm) == 3,
             fmt::format("after the reversed child's call: it has {} peers (want 2), the parent {} (want 3)",
                         connectedPeers(reversed), connectedPeers(comm)));
      // A split of the child: the owner is still the first communicator, in its own rank numbers.
      again = split(half, 0, -r, share);
      const hoccl::ConnectionLender& lender = again->impl->lender();
      expect(lender.owner == comm->impl, "a split of a borrowing child does not borrow from the first owner");
      const std::vector<int> owners = {r % 2 + 2, r % 2};  // key -r: the higher parent rank first
      expect(lender.ownerRank == owners, "the split of the child maps its ranks to the wrong owner ranks");
      checkedAllReduce(again, {r % 2, r % 2 + 2}, r, 3);
      expect(connectedPeers(comm) == 3, "the split of the child connected more than its owner had");
      // The parent goes first: its children hold it, and keep working.
      CALL(hocclCommDestroy(comm));
      comm = nullptr;
      checkedAllReduce(half, {r % 2, r % 2 + 2}, r, 4);
      checkedAllReduce(reversed, {0, 1, 2, 3}, r, 5);
      for (hocclComm_t* c : {&again, &reversed, &half}) {
        CALL(hocclCommDestroy(*c));
        *c = nullptr;
      }
    } catch (...) {
      for (hocclComm_t c : {again, reversed, half, comm})
        if (c) hocclCommAbort(c);
      throw;
    }
  }));
  INFO(transport << ", splitShare by " << how);
  CHECK(err == "");
}

TEST_CASE("splitShare: not shared unless every member asks, nor under HOCCL_MAX_CONNS; eager children get all",
          "[scale]") {
  const std::string transport = GENERATE("tcp", "shm");
  const std::string variant = GENERATE("one rank declines", "HOCCL_MAX_CONNS", "eager");
  ScopedEnv env(transportEnv(transport));
  ScopedEnv algo({{"HOCCL_ALGO", "ring"},
                  {"HOCCL_CONNECT", variant == "eager" ? "eager" : "lazy"},
                  {"HOCCL_CHECK_EXCHANGE", "all"},
                  {"HOCCL_MAX_CONNS", variant == "HOCCL_MAX_CONNS" ? "8" : "0"}});
  const int n = 4;
  std::string err = job(n, [&](int r, hocclComm_t comm) {
    checkedAllReduce(comm, {0, 1, 2, 3}, r, 0);
    const int before = connectedPeers(comm);
    hocclComm_t half = split(comm, r % 2, r, variant == "one rank declines" && r == 2 ? 0 : 1);
    // Rank 2 declining keeps {0, 2} apart; {1, 3} still share.
    const bool want = variant == "eager" || (variant == "one rank declines" && r % 2 == 1);
    const bool shared = half->impl->lender().owner != nullptr;
    expect(shared == want, fmt::format("{}: rank {}'s child {} its parent's connections", variant, r,
                                       shared ? "borrows" : "does not borrow"));
    if (variant == "eager")
      expect(connectedPeers(half) == 1, "an eager borrowing child does not hold its peer from the start");
    checkedAllReduce(half, {r % 2, r % 2 + 2}, r, 1);
    // A lazy borrower connects r + 2 in its parent; a child with connections of its own leaves the parent alone.
    const int after = before + (shared && variant != "eager" ? 1 : 0);
    expect(connectedPeers(comm) == after,
           fmt::format("the parent went from {} to {} peers (want {})", before, connectedPeers(comm), after));
    CALL(hocclCommDestroy(half));
  });
  INFO(transport << ", " << variant);
  CHECK(err == "");
}

TEST_CASE("splitShare: a parent and a sharing child in one group fail with a clear error; both work afterwards",
          "[scale]") {
  ScopedEnv env({{"HOCCL_SHM_DISABLE", "1"}, {"HOCCL_CONNECT", "lazy"}, {"HOCCL_CHECK_EXCHANGE", "all"}});
  const int n = 2;
  std::string err = job(n, [&](int r, hocclComm_t comm) {
    hocclComm_t child = split(comm, 0, r, 1);
    std::vector<float> a(100, 1.0f), b(100, 2.0f);
    CALL(hocclGroupStart());
    CALL(hocclAllReduce(a.data(), a.data(), a.size(), hocclFloat32, hocclSum, comm, nullptr));
    CALL(hocclAllReduce(b.data(), b.data(), b.size(), hocclFloat32, hocclSum, child, nullptr));
    const hocclResult_t rc = hocclGroupEnd();
    const std::string msg = hocclGetLastError(nullptr);
    expect(rc == hocclInvalidUsage, fmt::format("the group returned {} ({})", hocclGetErrorString(rc), msg));
    expect(msg.find("shares its connections") != std::string::npos &&
               msg.find("one call at a time") != std::string::npos,
           "the error does not say why: " + msg);
    expect(a[0] == 1.0f && b[0] == 2.0f, "a failed group changed the buffers");
    checkedAllReduce(comm, {0, 1}, r, 1);
    checkedAllReduce(child, {0, 1}, r, 2);
    CALL(hocclCommDestroy(child));
  });
  CHECK(err == "");
}

TEST_CASE("splitShare: a child's call that fails mid-way stops its parent too, with a clear error", "[scale]") {
  ScopedEnv env({{"HOCCL_SHM_DISABLE", "1"}, {"HOCCL_CONNECT", "lazy"}, {"HOCCL_CHECK_EXCHANGE", "all"}});
  const int n = 2;
  hocclUniqueId id;
  REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
  std::atomic<bool> rank0Done{false};
  std::string err = firstError(runThreads(n, [&](int r) {
    hocclComm_t comm = nullptr, child = nullptr;
    CALL(hocclCommInitRank(&comm, n, id, r));
    try {
      checkedAllReduce(comm, {0, 1}, r, 0);  // the parent connects its ring
      child = split(comm, 0, r, 1);
      if (r == 0) {
        // Rank 1 never makes the child's call: rank 0's waits with a receive posted on the parent's connection
        // until another thread aborts the child.
        // It aborts only once the call is inside the communicator (on a loaded machine this thread may not even have
        // made the call 300 ms later, and a call on an aborted, freed communicator is the caller's bug).
        std::thread aborter([&] {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
          while (child->impl->inFlight.load() == 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          hocclCommAbort(child);
        });
        std::vector<float> buf(1000, 1.0f);
        const hocclResult_t rc = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat32, hocclSum, child,
                                                nullptr);
        aborter.join();
        child = nullptr;
        expect(rc != hocclSuccess, "the aborted child's call succeeded");
        std::vector<float> mine(10, 1.0f);
        const hocclResult_t next = hocclAllReduce(mine.data(), mine.data(), mine.size(), hocclFloat32, hocclSum, comm,
                                                  nullptr);
        const std::string msg = hocclGetLastError(nullptr);
        expect(next == hocclInvalidUsage && msg.find("messages in flight") != std::string::npos &&
                   msg.find("destroy them") != std::string::npos,
               fmt::format("the parent's next call returned {}: {}", hocclGetErrorString(next), msg));
        expect(mine[0] == 1.0f, "the refused call changed its buffer");
        rank0Done = true;
      } else {
        while (!rank0Done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    } catch (...) {
      rank0Done = true;
      if (child) hocclCommAbort(child);
      hocclCommAbort(comm);
      throw;
    }
    if (child) hocclCommAbort(child);
    hocclCommAbort(comm);
  }));
  CHECK(err == "");
}

TEST_CASE("splitShare: a non-blocking split borrows too", "[scale]") {
  ScopedEnv env({{"HOCCL_SHM_DISABLE", "1"}, {"HOCCL_CONNECT", "lazy"}, {"HOCCL_CHECK_EXCHANGE", "all"}});
  const int n = 3;
  std::string err = job(n, [&](int r, hocclComm_t comm) {
    hocclConfig_t cfg = HOCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.splitShare = 1;
    hocclComm_t child = nullptr;
    hocclResult_t rc = hocclCommSplit(comm, 0, -r, &child, &cfg);
    expect(rc == hocclSuccess || rc == hocclInProgress, fmt::format("split: {}", hocclGetErrorString(rc)));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    hocclResult_t state = hocclInProgress;
    while (state == hocclInProgress && std::chrono::steady_clock::now() < deadline) {
      CALL(hocclCommGetAsyncError(child, &state));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    expect(state == hocclSuccess, fmt::format("the non-blocking split ended with {}", hocclGetErrorString(state)));
    expect(child->impl->lender().owner == comm->impl, "the non-blocking child does not borrow");
    checkedAllReduce(child, {0, 1, 2}, r, 1);
    expect(connectedPeers(comm) == 2, "the child connected peers of its own in its parent beyond the ring");
    CALL(hocclCommDestroy(child));
  });
  CHECK(err == "");
}

TEST_CASE("splitShare: a rank calling the parent while its peer calls the child fails the check on both", "[scale]") {
  const std::string exchange = GENERATE("doubling", "all");
  ScopedEnv env({{"HOCCL_SHM_DISABLE", "1"}, {"HOCCL_CONNECT", "lazy"}, {"HOCCL_CHECK_EXCHANGE", exchange}});
  const int n = 2;
  hocclUniqueId id;
  REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
  std::atomic<int> returned{0};  // ranks whose mismatched call returned: none aborts before both have the verdict
  std::string err = firstError(runThreads(n, [&](int r) {
    hocclComm_t comm = nullptr, child = nullptr;
    CALL(hocclCommInitRank(&comm, n, id, r));
    try {
      checkedAllReduce(comm, {0, 1}, r, 0);
      child = split(comm, 0, r, 1);
      checkedAllReduce(child, {0, 1}, r, 1);  // seq 0 on the child, 1 on the parent: the same next on both
      // Same collective, count and type, on the parent at rank 0 and on the child at rank 1: one channel carries
      // both, and only the communicator tells them apart.
      std::vector<float> buf(100, 1.0f);
      const hocclResult_t rc = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat32, hocclSum,
                                              r == 0 ? comm : child, nullptr);
      const std::string msg = hocclGetLastError(nullptr);
      ++returned;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (returned < n && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      expect(rc == hocclInvalidUsage && msg.find("different communicators that share connections") != std::string::npos,
             fmt::format("rank {}: {} ({})", r, hocclGetErrorString(rc), msg));
      expect(buf[0] == 1.0f, "the refused call changed its buffer");
    } catch (...) {
      if (child) hocclCommAbort(child);
      hocclCommAbort(comm);
      throw;
    }
    hocclCommAbort(child);
    hocclCommAbort(comm);
  }));
  INFO("HOCCL_CHECK_EXCHANGE=" << exchange);
  CHECK(err == "");
}

TEST_CASE("splitShare: config.splitShare other than 0 or 1 is refused", "[scale]") {
  std::string err = job(1, [&](int, hocclComm_t comm) {
    hocclConfig_t cfg = HOCCL_CONFIG_INITIALIZER;
    cfg.splitShare = 2;
    hocclComm_t child = nullptr;
    expect(hocclCommSplit(comm, 0, 0, &child, &cfg) == hocclInvalidArgument && child == nullptr,
           "splitShare = 2 was accepted");
    expect(std::string(hocclGetLastError(nullptr)).find("splitShare") != std::string::npos, "the error names no field");
  });
  CHECK(err == "");
}

TEST_CASE("256 thread ranks pass every collective on small counts over tcp", "[scale][big]") {
  everyCollectiveOn256("tcp");
}

TEST_CASE("256 thread ranks pass every collective on small counts over shm", "[scale][big]") {
  everyCollectiveOn256("shm");
}

TEST_CASE("lazy: a peer that never makes the call is named when the connect gives up (HOCCL_TIMEOUT)", "[scale]") {
  const std::string transport = GENERATE("tcp", "shm");
  ScopedEnv env(transportEnv(transport));
  ScopedEnv lazy(ScopedEnv::Vars{{"HOCCL_CONNECT", "lazy"}, {"HOCCL_TIMEOUT", "1"}});
  std::atomic<bool> done{false};
  std::string message;
  hocclResult_t code = hocclSuccess;
  std::string err = job(2, [&](int r, hocclComm_t comm) {
    if (r == 1) {  // stays alive (and silent) until rank 0 has given up
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    int x = 1;
    code = hocclAllReduce(&x, &x, 1, hocclInt32, hocclSum, comm, nullptr);
    message = hocclGetLastError(nullptr);
    done = true;
  });
  INFO(transport << ": " << message);
  CHECK(err == "");
  CHECK(code == hocclTimeout);  // a silent (not dead) peer: the wait ran out, as in every other wait
  CHECK(message.find("made no progress for 1 s, waiting for rank 1 (host") != std::string::npos);
}

TEST_CASE("HOCCL_MAX_CONNS: idle connections are closed past the limit and connected again on use", "[scale]") {
  const std::string transport = GENERATE("tcp", "shm");
  const int limit = GENERATE(2, 3);
  ScopedEnv env({{"HOCCL_SHM_DISABLE", transport == "tcp" ? "1" : "0"},
                 {"HOCCL_CONNECT", "lazy"},
                 {"HOCCL_ALGO", "ring"},
                 {"HOCCL_TCP_CONNS", "1"},
                 {"HOCCL_TIMEOUT", "60"},
                 {"HOCCL_MAX_CONNS", std::to_string(limit)}});
  const int n = 10, rounds = 40;
  // A rank's calls need at most 2 peers (a ring, or a send/recv pair: its partner twice), so a rank holds at most
  // max(limit, 2) connections that are not closing, plus those whose close it asked for and that are still unanswered
  // (at most the ones it asked for at its last two call starts, 2 each: one call's peers pushed over the limit).
  const int bound = std::max(limit, 2) + 2;
  std::atomic<int> ready{0}, baseFds{0}, maxFds{0}, finished{0};
  std::vector<int> maxPeers(n, 0), touched(n, 0);
  std::string err = job(n, [&](int r, hocclComm_t comm) {
    if (++ready == n) baseFds = openFds();  // every rank's bootstrap and listener are open, no peer connected
    while (baseFds.load() == 0) std::this_thread::yield();
    std::vector<bool> seen(n, false);
    auto note = [&](const std::string& what) {
      const int peers = connectedPeers(comm);
      maxPeers[r] = std::max(maxPeers[r], peers);
      expect(peers <= bound,
             fmt::format("{}: {} peers connected, more than {} (HOCCL_MAX_CONNS={})", what, peers, bound, limit));
      int fds = openFds(), seenMax = maxFds.load();
      while (fds > seenMax && !maxFds.compare_exchange_weak(seenMax, fds)) {
      }
    };
    for (int k = 0; k < rounds; ++k) {
      if (k % 2 == 0) {  // send/recv with a random partner, an odd count (0 on some rounds)
        const int peer = partnerOf(r, n, k);
        seen[static_cast<size_t>(peer)] = true;
        const size_t count = k % 6 == 4 ? 0 : 101 + 2 * k;
        std::vector<float> out = valuesOf(r, k, count), in(count, -9.0f);
        // Every other such round is one-way (the lower rank only sends): a sender then runs ahead of its peer, so
        // a close request meets messages in flight, which the handshake must refuse.
        const bool oneWay = k % 4 == 2, sends = !oneWay || r < peer, receives = !oneWay || r > peer;
        CALL(hocclGroupStart());
        if (sends) CALL(hocclSend(out.data(), count, hocclFloat32, peer, comm, nullptr));
        if (receives) CALL(hocclRecv(in.data(), count, hocclFloat32, peer, comm, nullptr));
        CALL(hocclGroupEnd());
        if (receives) expect(in == valuesOf(peer, k, count), fmt::format("round {}: wrong data from rank {}", k, peer));
        note(fmt::format("round {} (send/recv with rank {})", k, peer));
      } else {  // a ring all-reduce (in place on some rounds), against a double-precision reference
        seen[static_cast<size_t>((r + 1) % n)] = seen[static_cast<size_t>((r + n - 1) % n)] = true;
        const size_t count = 37 + 10 * k;
        std::vector<float> in = valuesOf(r, k, count), out(count);
        float* dst = k % 4 == 1 ? in.data() : out.data();
        CALL(hocclAllReduce(in.data(), dst, count, hocclFloat32, hocclSum, comm, nullptr));
        std::vector<double> want(count, 0.0);
        for (int q = 0; q < n; ++q) {
          std::vector<float> v = valuesOf(q, k, count);
          for (size_t e = 0; e < count; ++e) want[e] += v[e];
        }
        for (size_t e = 0; e < count; ++e)
          expect(std::abs(dst[e] - want[e]) <= 1e-5 * n,
                 fmt::format("round {}: all-reduce element {} is {}, the reference {}", k, e, dst[e], want[e]));
        note(fmt::format("round {} (ring all-reduce)", k));
      }
    }
    touched[r] = static_cast<int>(std::count(seen.begin(), seen.end(), true));
    ++finished;  // the descriptor count above must not see the all-to-all's connections of faster ranks
    while (finished.load() < n) std::this_thread::yield();
    // A call that needs every peer at once still works (the limit yields to the call), and later calls shrink back.
    std::vector<int> a2aOut(3 * n), a2aIn(3 * n, -1);
    for (int j = 0; j < 3 * n; ++j) a2aOut[j] = r * 1000 + j;
    CALL(hocclAlltoAll(a2aOut.data(), a2aIn.data(), 3, hocclInt32, comm, nullptr));
    for (int j = 0; j < n; ++j)
      for (int e = 0; e < 3; ++e)
        expect(a2aIn[j * 3 + e] == j * 1000 + r * 3 + e, fmt::format("all-to-all: block {} element {}", j, e));
    for (int k = 0; k < 4; ++k) {
      float x = 1.0f;
      CALL(hocclAllReduce(&x, &x, 1, hocclFloat32, hocclSum, comm, nullptr));
      expect(x == n, "all-reduce after the all-to-all");
    }
    expect(connectedPeers(comm) <= bound,
           fmt::format("{} peers still connected 4 calls after an all-to-all (limit {})", connectedPeers(comm), limit));
  });
  INFO(transport << ", HOCCL_MAX_CONNS=" << limit);
  REQUIRE(err == "");
  int most = 0, fewestTouched = n;
  for (int r = 0; r < n; ++r) {
    most = std::max(most, maxPeers[r]);
    fewestTouched = std::min(fewestTouched, touched[r]);
  }
  INFO("most peers held " << most << ", fewest peers touched " << fewestTouched);
  CHECK(fewestTouched > bound);  // so the bound held only because connections were closed
  CHECK(most < fewestTouched);
  // Descriptors (before the all-to-all): one per connected peer over the baseline (tcp: its socket, with
  // HOCCL_TCP_CONNS=1; shm: the shared file this rank created for it, kept open while connected).
  INFO("descriptors over the baseline at most " << maxFds.load() - baseFds.load());
  CHECK(maxFds.load() - baseFds.load() <= n * bound);
}

TEST_CASE("HOCCL_MAX_CONNS: a close request that meets a message in flight is refused, the message arrives",
          "[scale]") {
  // Rank 1 sends to rank 0 (one-way) and then reads rank 0's close request, sent before rank 0 received that message:
  // the two sides are out of step, so rank 1 must refuse (a rank that closed here would lose the message or leave
  // rank 0 with an answer it cannot match). The order is forced with flags between the thread ranks.
  const std::string transport = GENERATE("tcp", "shm");
  INFO(transport);
  ScopedEnv env({{"HOCCL_SHM_DISABLE", transport == "tcp" ? "1" : "0"},
                 {"HOCCL_CONNECT", "lazy"},
                 {"HOCCL_TCP_CONNS", "1"},
                 {"HOCCL_TIMEOUT", "30"},
                 {"HOCCL_MAX_CONNS", "1"}});
  std::atomic<int> stage{0};
  auto waitStage = [&](int s) {
    while (stage.load() < s) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  auto exchange = [](hocclComm_t comm, int r, int peer, int k) {
    std::vector<float> out = valuesOf(r, k, 33), in(33, -9.0f);
    CALL(hocclGroupStart());
    CALL(hocclSend(out.data(), out.size(), hocclFloat32, peer, comm, nullptr));
    CALL(hocclRecv(in.data(), in.size(), hocclFloat32, peer, comm, nullptr));
    CALL(hocclGroupEnd());
    expect(in == valuesOf(peer, k, 33), fmt::format("exchange {}: wrong data from rank {}", k, peer));
  };
  std::string err = job(4, [&](int r, hocclComm_t comm) {
    std::vector<float> oneWay = valuesOf(1, 2, 65), got(65, -9.0f);
    switch (r) {
      case 0:
        exchange(comm, 0, 1, 1);
        waitStage(1);             // rank 1's one-way message is on its way
        exchange(comm, 0, 2, 2);  // over the limit: asks rank 1 to close (it has not received the message yet)
        stage = 2;
        CALL(hocclRecv(got.data(), got.size(), hocclFloat32, 1, comm, nullptr));
        expect(got == oneWay, "the one-way message from rank 1");
        exchange(comm, 0, 1, 4);
        break;
      case 1:
        exchange(comm, 1, 0, 1);
        CALL(hocclSend(oneWay.data(), oneWay.size(), hocclFloat32, 0, comm, nullptr));
        stage = 1;
        waitStage(2);
        exchange(comm, 1, 3, 3);  // reads rank 0's request here: must refuse it
        exchange(comm, 1, 0, 4);
        break;
      case 2:
        exchange(comm, 2, 3, 1);
        exchange(comm, 2, 0, 2);
        break;
      case 3:
        exchange(comm, 3, 2, 1);
        exchange(comm, 3, 1, 3);
        break;
    }
  });
  CHECK(err == "");
}

TEST_CASE("HOCCL_MAX_CONNS: a peer that dies while its close is asked for is named on every rank, no hang", "[scale]") {
  // Processes: rank 0 asks rank 1 to close their idle connection; rank 1 exits without answering. Rank 0's next
  // call with rank 1 and rank 2's all-reduce must fail with hocclRemoteError naming rank 1, well before the timeout.
  const std::string transport = GENERATE("tcp", "shm");
  ScopedEnv env({{"HOCCL_SHM_DISABLE", transport == "tcp" ? "1" : "0"},
                 {"HOCCL_CONNECT", "lazy"},
                 {"HOCCL_TCP_CONNS", "1"},
                 {"HOCCL_TIMEOUT", "30"},
                 {"HOCCL_MAX_CONNS", "1"}});
  hocclUniqueId id;
  REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> results = hoccl::test::runProcesses(
      3,
      [&](int r) -> std::string {
        hocclComm_t comm = nullptr;
        if (hocclCommInitRank(&comm, 3, id, r) != hocclSuccess) return "init failed";
        auto exchange = [&](int peer) {
          int out = r, in = -1;
          hocclGroupStart();
          hocclSend(&out, 1, hocclInt32, peer, comm, nullptr);
          hocclRecv(&in, 1, hocclInt32, peer, comm, nullptr);
          hocclResult_t rc = hocclGroupEnd();
          if (rc == hocclSuccess && in != peer) return std::string("wrong data");
          return rc == hocclSuccess ? std::string()
                                    : fmt::format("code {}: {}", static_cast<int>(rc), hocclGetLastError(nullptr));
        };
        std::string text;
        if (r == 1) {
          text = exchange(0);
          std::this_thread::sleep_for(std::chrono::milliseconds(800));  // rank 0's close request arrives meanwhile
          std::fflush(stdout);
          _exit(text.empty() ? 0 : 1);
        }
        if (r == 0) {
          text = exchange(1);
          if (!text.empty()) return "first exchange: " + text;
          text = exchange(2);  // over the limit of 1: asks rank 1 to close
          if (!text.empty()) return "second exchange: " + text;
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // rank 1 is gone by now
          text = exchange(1);
        } else {
          text = exchange(0);
          if (!text.empty()) return "exchange: " + text;
          float x = 1;
          hocclResult_t rc = hocclAllReduce(&x, &x, 1, hocclFloat32, hocclSum, comm, nullptr);
          text = rc == hocclSuccess ? std::string()
                                    : fmt::format("code {}: {}", static_cast<int>(rc), hocclGetLastError(nullptr));
        }
        hocclCommAbort(comm);
        return text.empty() ? std::string("the call with the dead rank 1 succeeded") : text;
      },
      std::chrono::seconds(60));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(transport << ": " << hoccl::test::allErrors(results));
  for (int r : {0, 2}) {
    CHECK(results[r].find(fmt::format("code {}", static_cast<int>(hocclRemoteError))) != std::string::npos);
    CHECK(results[r].find("rank 1") != std::string::npos);
  }
  CHECK(seconds < 25);  // named, not timed out (HOCCL_TIMEOUT=30)
}
