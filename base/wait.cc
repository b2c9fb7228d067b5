// The waiting policy's numbers (base/wait.h): which policy a host's numbers call for, how long each phase of a
// policy lasts, and the parse of /proc/loadavg. Out of line so that tuning them rebuilds one file.
#include "base/wait.h"

#include <cstdlib>

namespace hoccl {
namespace {

// More ranks per core than this: Block. It was 2 until 2026-11-27: measured with 8 and 16 rank processes on 2 cores
// (4 and 8 per core), Share ran the ring all-reduce of 8 B-4 KiB 3-5x faster than Block (8 processes: 104-120 us
// against 317-578 us a call; every ring step waited in the kernel for a peer to be woken and switched in), of
// 256 KiB 4x, of 64 MiB 1.15x, and single copy's of 256 KiB 2x (docs/performance.md, "The wait policy on 4-8 ranks
// per core"). The rank threads of tools/bench/scale (32-64 per core) keep Block.
constexpr int kBlockRanksPerCore = 8;

}  // namespace

WaitPolicy chooseWaitPolicy(const HostLoad& h) {
  const int cores = h.cores < 1 ? 1 : h.cores;
  const int ranks = h.localRanks < 1 ? 1 : h.localRanks;
  if (ranks > kBlockRanksPerCore * cores) return WaitPolicy::Block;
  if (ranks > cores) return WaitPolicy::Share;
  if (h.runnable >= 0) {
    const int others = h.runnable > ranks ? h.runnable - ranks : 0;
    if (others + ranks > (h.hostCpus < cores ? cores : h.hostCpus)) return WaitPolicy::Share;
  }
  return WaitPolicy::Spin;
}

Backoff::Limits Backoff::limits(WaitPolicy policy) {
  switch (policy) {
    case WaitPolicy::Spin: return {1u << 14, 1u << 17};  // about a millisecond of polling, then yield a while
    case WaitPolicy::Share: return {16, 16 + 64};        // a few microseconds of each
    case WaitPolicy::Block: return {2, 3};
  }
  return {0, 0};
}

int runnableFromLoadavg(const char* text) {
  const char* p = text;
  for (int field = 0; field < 3; ++field) {  // skip the three load averages
    while (*p == ' ') ++p;
    if (*p == '\0') return -1;
    while (*p != ' ' && *p != '\0') ++p;
  }
  while (*p == ' ') ++p;
  if (*p < '0' || *p > '9') return -1;
  char* end = nullptr;
  const long n = std::strtol(p, &end, 10);
  if (*end != '/' || n < 0 || n > (1L << 30)) return -1;
  return static_cast<int>(n);
}

}  // namespace hoccl
