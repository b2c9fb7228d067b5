// The waiting policy (base/wait.h): chooseWaitPolicy's decisions from the host's numbers, checked against a table
// whose every row says why, and against monotonicity over a sweep (more ranks or more load never makes a wait more
// eager); the phases of Backoff for each policy; the parse of /proc/loadavg; and the communicator's inputs
// (HOCCL_WAIT_POLICY forces a policy, a bad value fails the init with a message naming the values, ranks as
// threads on this machine choose Block).
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/sysinfo.h>

#include <string>
#include <vector>

#include "scoped_env.h"
#include "base/wait.h"
#include "comm/communicator.h"
#include "hoccl/hoccl.h"

using namespace hoccl;
using hoccl::test::ScopedEnv;

namespace {

HostLoad load(int ranks, int cores, int hostCpus, int runnable) {
  HostLoad h;
  h.localRanks = ranks;
  h.cores = cores;
  h.hostCpus = hostCpus;
  h.runnable = runnable;
  return h;
}

// Counts the actions of `polls` fruitless polls: {spins, yields, blocks}, and the poll at which the first Block came.
struct Phases {
  unsigned spins = 0, yields = 0, blocks = 0, firstBlock = ~0u;
};
Phases phases(Backoff& b, unsigned polls) {
  Phases p;
  for (unsigned i = 0; i < polls; ++i) {
    switch (b.next()) {
      case WaitAction::Spin: ++p.spins; break;
      case WaitAction::Yield: ++p.yields; break;
      case WaitAction::Block:
        if (p.blocks++ == 0) p.firstBlock = i;
        break;
    }
  }
  return p;
}

}  // namespace

TEST_CASE("chooseWaitPolicy: a table of hosts, each with its reason", "[wait]") {
  struct Row {
    HostLoad h;
    WaitPolicy want;
    const char* why;
  };
  const std::vector<Row> rows = {
      {load(2, 2, 2, -1), WaitPolicy::Spin, "a core per rank, load unknown"},
      {load(2, 2, 2, 0), WaitPolicy::Spin, "a core per rank, nothing runnable (both ranks asleep)"},
      {load(2, 2, 2, 2), WaitPolicy::Spin, "the two runnable threads are the ranks themselves"},
      {load(2, 2, 2, 3), WaitPolicy::Share, "one more runnable thread than the ranks: it needs one of the 2 cores"},
      {load(2, 2, 2, 30), WaitPolicy::Share, "a loaded host (run queue 30 on 2 cores)"},
      {load(1, 1, 1, 1), WaitPolicy::Spin, "one rank alone on one core"},
      {load(1, 1, 1, 2), WaitPolicy::Share, "one rank and another job on one core"},
      {load(2, 16, 16, 10), WaitPolicy::Spin, "8 other threads and 2 ranks fit in 16 CPUs"},
      {load(2, 16, 16, 17), WaitPolicy::Share, "15 others and 2 ranks exceed 16 CPUs"},
      {load(2, 2, 16, 10), WaitPolicy::Spin, "affinity of 2 CPUs, the host's 16 have room for 8 others"},
      {load(3, 2, 16, 0), WaitPolicy::Share, "3 ranks on the 2 CPUs this process may use"},
      {load(4, 2, 2, -1), WaitPolicy::Share, "2 ranks per core: a few yields still reach the peer"},
      {load(4, 2, 2, 0), WaitPolicy::Share, "the load is not needed to see the contention"},
      {load(5, 2, 2, -1), WaitPolicy::Share, "more than 2 ranks per core: yields still reach the peer sooner"},
      {load(8, 2, 2, 8), WaitPolicy::Share, "8 ranks on 2 cores"},
      {load(16, 2, 2, -1), WaitPolicy::Share, "8 ranks per core"},
      {load(17, 2, 2, -1), WaitPolicy::Block, "more than 8 ranks per core"},
      {load(128, 2, 2, 3), WaitPolicy::Block, "128 rank threads on 2 cores, most asleep"},
      {load(64, 16, 16, 0), WaitPolicy::Share, "4 ranks per core on a big host"},
      {load(160, 16, 16, 0), WaitPolicy::Block, "10 ranks per core on a big host"},
      {load(0, 0, 0, -1), WaitPolicy::Spin, "nonsense counts are read as 1 rank on 1 core"},
      {load(9, 0, 0, -1), WaitPolicy::Block, "no usable core reported: 9 ranks on the 1 assumed"},
  };
  for (const Row& r : rows) {
    INFO(r.why << ": ranks " << r.h.localRanks << ", cores " << r.h.cores << ", host CPUs " << r.h.hostCpus
               << ", runnable " << r.h.runnable);
    CHECK(chooseWaitPolicy(r.h) == r.want);
  }
}

TEST_CASE("chooseWaitPolicy: more ranks or more load never makes a wait more eager", "[wait]") {
  for (int cores = 1; cores <= 8; ++cores)
    for (int hostCpus = cores; hostCpus <= 16; hostCpus += 3)
      for (int ranks = 1; ranks <= 40; ++ranks)
        for (int runnable = -1; runnable <= 60; ++runnable) {
          const WaitPolicy p = chooseWaitPolicy(load(ranks, cores, hostCpus, runnable));
          INFO("ranks " << ranks << ", cores " << cores << ", host CPUs " << hostCpus << ", runnable " << runnable);
          CHECK(chooseWaitPolicy(load(ranks + 1, cores, hostCpus, runnable)) >= p);
          if (runnable >= 0) CHECK(chooseWaitPolicy(load(ranks, cores, hostCpus, runnable + 1)) >= p);
          // The defining thresholds, restated independently of the implementation's arithmetic.
          if (ranks > 8 * cores) CHECK(p == WaitPolicy::Block);
          else if (ranks > cores) CHECK(p == WaitPolicy::Share);
          else if (runnable >= 0 && std::max(runnable, ranks) > hostCpus) CHECK(p == WaitPolicy::Share);
          else CHECK(p == WaitPolicy::Spin);
        }
}

TEST_CASE("Backoff: the phases of each policy", "[wait]") {
  SECTION("spin: about a millisecond of spinning, then a long run of yields, then blocks") {
    Backoff b(WaitPolicy::Spin);
    const Phases p = phases(b, (1u << 17) + 10);
    CHECK(p.spins == (1u << 14));
    CHECK(p.yields == (1u << 17) - (1u << 14));
    CHECK(p.firstBlock == (1u << 17));
    CHECK(b.blockMicros() == 50);
  }
  SECTION("share: a few spins and yields, blocking before the 100th poll") {
    Backoff b(WaitPolicy::Share);
    const Phases p = phases(b, 1000);
    CHECK(p.spins > 0);
    CHECK(p.spins <= 64);
    CHECK(p.yields > 0);
    CHECK(p.yields <= 128);
    CHECK(p.firstBlock < 100);
    CHECK(p.blocks == 1000 - p.firstBlock);
  }
  SECTION("block: blocks by the 4th poll") {
    Backoff b(WaitPolicy::Block);
    const Phases p = phases(b, 100);
    CHECK(p.firstBlock <= 3);
    CHECK(p.blocks >= 97);
  }
  SECTION("reset() starts the phases again; long waits block longer") {
    Backoff b(WaitPolicy::Share);
    phases(b, 5000);
    CHECK(b.blockMicros() == 200);
    b.reset();
    CHECK(b.idle() == 0);
    CHECK(b.next() == WaitAction::Spin);
    CHECK(b.blockMicros() == 50);
  }
  SECTION("the bool constructor (waits without a communicator): true is share, false is spin") {
    CHECK(Backoff(true).policy() == WaitPolicy::Share);
    CHECK(Backoff(false).policy() == WaitPolicy::Spin);
  }
}

TEST_CASE("runnableFromLoadavg reads the runnable count of /proc/loadavg", "[wait]") {
  CHECK(runnableFromLoadavg("0.50 0.40 0.30 3/812 12345\n") == 3);
  CHECK(runnableFromLoadavg("25.02 16.40 7.28 27/1500 99") == 27);
  CHECK(runnableFromLoadavg("0.00 0.00 0.00 0/1 1") == 0);
  CHECK(runnableFromLoadavg("") == -1);
  CHECK(runnableFromLoadavg("0.50 0.40 0.30") == -1);
  CHECK(runnableFromLoadavg("0.50 0.40 0.30 x/812 1") == -1);
  CHECK(runnableFromLoadavg("0.50 0.40 0.30 3 1") == -1);
  CHECK(runnableFromLoadavg("0.50 0.40 0.30 -3/812 1") == -1);
  CHECK(runnableFromLoadavg("0.50 0.40 0.30 99999999999/812 1") == -1);
}

TEST_CASE("the communicator's wait policy: forced, refused, and chosen from this machine", "[wait]") {
  SECTION("HOCCL_WAIT_POLICY forces each policy") {
    for (const char* name : {"spin", "share", "block"}) {
      ScopedEnv env("HOCCL_WAIT_POLICY", name);
      hocclComm_t comm = nullptr;
      REQUIRE(hocclCommInitAll(&comm, 1, nullptr) == hocclSuccess);
      CHECK(std::string(waitPolicyName(comm->impl->waitPolicy())) == name);
      hocclCommDestroy(comm);
    }
  }
  SECTION("an unknown value fails the init and names the values") {
    ScopedEnv env("HOCCL_WAIT_POLICY", "fast");
    hocclComm_t comm = nullptr;
    CHECK(hocclCommInitAll(&comm, 1, nullptr) == hocclInvalidArgument);
    const std::string msg = hocclGetLastError(nullptr);
    CHECK(msg.find("HOCCL_WAIT_POLICY=fast") != std::string::npos);
    CHECK(msg.find("spin, share or block") != std::string::npos);
  }
  SECTION("auto: more than 8 rank threads per usable CPU block, as many as the CPUs never block") {
    ScopedEnv env("HOCCL_WAIT_POLICY", nullptr);
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
    const int cpus = CPU_COUNT(&set);
    if (cpus <= 4) {  // a job of 8 x cpus + 1 threads stays small
      const int n = 8 * cpus + 1;
      std::vector<hocclComm_t> comms(n, nullptr);
      REQUIRE(hocclCommInitAll(comms.data(), n, nullptr) == hocclSuccess);
      for (hocclComm_t c : comms) CHECK(c->impl->waitPolicy() == WaitPolicy::Block);
      for (hocclComm_t c : comms) hocclCommDestroy(c);
    }
    hocclComm_t one = nullptr;
    REQUIRE(hocclCommInitAll(&one, 1, nullptr) == hocclSuccess);
    CHECK(one->impl->waitPolicy() != WaitPolicy::Block);  // 1 rank on >= 1 CPU: spin or share, by the load
    hocclCommDestroy(one);
  }
}
