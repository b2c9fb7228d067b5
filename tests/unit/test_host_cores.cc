// The cores per host (src/comm/host_cores.h): fewestHostCores over hand-made RankInfo tables (masks that overlap,
// differ per host, or are empty), and end to end: thread ranks pinned to one CPU carry that mask in their RankInfo
// through a plain init, a split and a scalable init, and the tuner's model gets the host's cores from it.
#include <pthread.h>
#include <sched.h>
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/host_cores.h"
#include "hoccl/hoccl.h"

using namespace hoccl;

namespace {

// A RankInfo whose mask holds CPUs [lo, hi).
boot::RankInfo withCpus(int lo, int hi) {
  boot::RankInfo info;
  CPU_ZERO(&info.cpus);
  for (int c = lo; c < hi; ++c) CPU_SET(c, &info.cpus);
  return info;
}

// The first CPU this thread may run on.
int firstUsableCpu() {
  cpu_set_t mask = usableCpuMask();
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) return c;
  return 0;
}

// What one rank saw of its communicator: how many ranks carried a one-CPU mask, and the tuner's cores.
struct Seen {
  std::string error;
  int onePinned = 0;
  int cores = -1;
};

Seen look(hocclComm_t comm) {
  Seen s;
  for (const boot::RankInfo& info : comm->impl->rankInfo()) s.onePinned += CPU_COUNT(&info.cpus) == 1;
  s.cores = comm->impl->tuningModel().cores;
  return s;
}

// Runs fn(rank) on `n` threads each pinned to the same CPU; returns what each saw.
template <typename Fn>
std::vector<Seen> pinnedRanks(int n, Fn fn) {
  const int cpu = firstUsableCpu();
  std::vector<Seen> seen(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) {
        seen[static_cast<size_t>(r)].error = "pthread_setaffinity_np failed";
        return;
      }
      seen[static_cast<size_t>(r)] = fn(r);
    });
  for (auto& t : threads) t.join();
  return seen;
}

// Every rank saw every rank's one-CPU mask, and the tuner's model one core per host.
void checkPinned(const std::vector<Seen>& seen) {
  for (size_t r = 0; r < seen.size(); ++r) {
    INFO("rank " << r);
    CHECK(seen[r].error.empty());
    CHECK(seen[r].onePinned == static_cast<int>(seen.size()));
    CHECK(seen[r].cores == 1);
  }
}

}  // namespace

TEST_CASE("the cores per host are the union of each host's masks, the fewest of any host", "[cores]") {
  SECTION("overlapping masks on one host count each CPU once") {
    std::vector<boot::RankInfo> ranks = {withCpus(0, 4), withCpus(2, 6), withCpus(3, 5)};
    CHECK(fewestHostCores(ranks, {0, 0, 0}) == 6);
  }
  SECTION("masks that differ per host: the fewest of any host") {
    // Host 0: CPUs 0-3 and 4-7 (8); host 1: CPUs 0-2 twice (3); host 2: CPUs 8-63 (56).
    std::vector<boot::RankInfo> ranks = {withCpus(0, 4), withCpus(0, 3), withCpus(4, 8), withCpus(0, 3),
                                         withCpus(8, 64)};
    CHECK(fewestHostCores(ranks, {0, 1, 0, 1, 2}) == 3);
    // The same ranks on one host: the union of all, 64.
    CHECK(fewestHostCores(ranks, {0, 0, 0, 0, 0}) == 64);
  }
  SECTION("an empty mask adds nothing; a host of empty masks is skipped") {
    std::vector<boot::RankInfo> ranks = {withCpus(0, 2), boot::RankInfo{}, boot::RankInfo{}, withCpus(0, 5)};
    CHECK(CPU_COUNT(&ranks[1].cpus) == 0);             // a RankInfo made without a mask has an empty one
    CHECK(fewestHostCores(ranks, {0, 0, 1, 2}) == 2);  // host 1 (only rank 2, unknown) is left out
    CHECK(fewestHostCores(ranks, {0, 1, 1, 1}) == 2);
    CHECK(fewestHostCores({boot::RankInfo{}, boot::RankInfo{}}, {0, 1}) == 0);  // nothing known: 0 (model's own)
    CHECK(fewestHostCores({}, {}) == 0);
  }
  SECTION("ranks beyond the topology's hostOf are ignored") {
    std::vector<boot::RankInfo> ranks = {withCpus(0, 4), withCpus(0, 1)};
    CHECK(fewestHostCores(ranks, {0}) == 4);
  }
  SECTION("this process's mask: its affinity, never empty") {
    cpu_set_t mine = usableCpuMask();
    cpu_set_t affinity;
    CPU_ZERO(&affinity);
    REQUIRE(sched_getaffinity(0, sizeof(affinity), &affinity) == 0);
    CHECK(CPU_EQUAL(&mine, &affinity));
    CHECK(CPU_COUNT(&mine) > 0);
  }
}

TEST_CASE("ranks pinned to one CPU carry that mask in their RankInfo through init, split and scalable init",
          "[cores]") {
  const int n = 2;
  SECTION("a plain init and a split of it") {
    hocclUniqueId id;
    REQUIRE(hocclGetUniqueId(&id) == hocclSuccess);
    std::vector<Seen> child(static_cast<size_t>(n));
    std::vector<Seen> seen = pinnedRanks(n, [&](int r) {
      Seen s;
      hocclComm_t comm = nullptr;
      if (hocclCommInitRank(&comm, n, id, r) != hocclSuccess) return Seen{"init failed", 0, -1};
      s = look(comm);
      hocclComm_t sub = nullptr;
      if (hocclCommSplit(comm, 0, n - r, &sub, nullptr) != hocclSuccess || !sub) s.error = "split failed";
      else {
        child[static_cast<size_t>(r)] = look(sub);
        hocclCommDestroy(sub);
      }
      hocclCommDestroy(comm);
      return s;
    });
    checkPinned(seen);
    checkPinned(child);
  }
  SECTION("a scalable init (one id per rank)") {
    hocclUniqueId ids[2];
    REQUIRE(hocclGetUniqueId(&ids[0]) == hocclSuccess);
    REQUIRE(hocclGetUniqueId(&ids[1]) == hocclSuccess);
    std::vector<Seen> seen = pinnedRanks(n, [&](int r) {
      hocclComm_t comm = nullptr;
      if (hocclCommInitRankScalable(&comm, n, r, 2, ids, nullptr) != hocclSuccess)
        return Seen{"scalable init failed", 0, -1};
      Seen s = look(comm);
      hocclCommDestroy(comm);
      return s;
    });
    checkPinned(seen);
  }
}
