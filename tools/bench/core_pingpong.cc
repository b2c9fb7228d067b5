// How far apart two CPUs are, as the caches see it: a cache line handed back and forth between two threads pinned
// to the two CPUs, nanoseconds per round trip (the median of 5 runs of 2,000 round trips).
// Usage: core_pingpong [cpuA] [cpuB]   (default 0 and 1)
// Prints "<ns> ns per round trip between CPU A and CPU B". Exit 2 when a thread cannot be pinned.
//
// Why the benchmarks run it: on the 2-vCPU build machines the hypervisor places the two vCPUs on cores that share a
// last-level cache (about 110 ns here) or on cores that do not (about 500 ns), and moves them every few seconds to
// minutes while nothing inside the machine can see it (hwloc reports one shared L3 either way). Every transfer that
// hands cache lines from one core to the other (hoccl's shm slots, a reduction reading a peer's output) then runs
// 2-7x slower, while a copy that reads a peer's unchanged buffer once (process_vm_readv) barely changes
// (docs/performance.md, "Near and far cores"). tools/bench/compare-mpi and check-tuner run this before and after
// each launch and label the launch with what they saw.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kRoundTrips = 2000;
constexpr int kRuns = 5;

struct alignas(64) Line {
  std::atomic<int> value{0};
};

// Pins the calling thread to `cpu`; false when it cannot (a CPU outside this process's mask or outside cpu_set_t).
bool pin(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// One run: the caller's thread (on cpuA) writes i into `ping`, the other thread (on cpuB) answers with i in `pong`.
// Both threads are pinned before the clock starts; nothing else is shared while it runs. Returns nanoseconds per
// round trip, or a negative value when a thread could not be pinned.
double run(int cpuA, int cpuB) {
  Line ping, pong, ready;  // ready: 1 = the echo thread is pinned, -1 = it could not be
  std::thread echo([&] {
    if (!pin(cpuB)) {
      ready.value.store(-1, std::memory_order_release);
      return;
    }
    ready.value.store(1, std::memory_order_release);
    for (int i = 1; i <= kRoundTrips; ++i) {
      while (ping.value.load(std::memory_order_acquire) != i) {
      }
      pong.value.store(i, std::memory_order_release);
    }
  });
  const bool pinned = pin(cpuA);
  while (ready.value.load(std::memory_order_acquire) == 0) {
  }
  if (ready.value.load() < 0) {
    echo.join();
    return -1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= kRoundTrips; ++i) {
    ping.value.store(i, std::memory_order_release);
    while (pong.value.load(std::memory_order_acquire) != i) {
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  echo.join();
  if (!pinned) return -1;  // the echo thread had its round trips all the same, so it has ended
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / kRoundTrips;
}

}  // namespace

int main(int argc, char** argv) {
  const int cpuA = argc > 1 ? std::atoi(argv[1]) : 0;
  const int cpuB = argc > 2 ? std::atoi(argv[2]) : 1;
  std::vector<double> ns;
  for (int r = 0; r < kRuns; ++r) {
    const double v = run(cpuA, cpuB);
    if (v < 0) {
      std::fprintf(stderr, "core_pingpong: cannot pin threads to CPUs %d and %d (taskset -p $$ shows which this shell "
                   "may use)\n", cpuA, cpuB);
      return 2;
    }
    ns.push_back(v);
  }
  std::sort(ns.begin(), ns.end());
  std::printf("%.0f ns per round trip between CPU %d and CPU %d\n", ns[kRuns / 2], cpuA, cpuB);
  return 0;
}
