// Zero copy on one host (issue 16), the parts the collectives matrix (mp_collectives --registered) does not cover:
//  1. in use: while a registered all-reduce waits for a late peer, hocclCommDeregister and hocclMemFree of its
//     buffers fail with hocclInvalidUsage and change nothing; the call then completes with the right result, and
//     both succeed afterwards;
//  2. kill: rank 2 of 3 is SIGKILLed in the middle of a stream of registered all-reduces (zero copy through mapped
//     buffers): both survivors get hocclRemoteError (no crash, no hang) and can still read and free their buffers;
//     the failed call released the peers' mappings (before the kill each survivor maps its peers' blocks; after the
//     error none is mapped, so the dead rank's memory is not kept alive), and after abort and free nothing of
//     hocclMemAlloc is mapped and no entry of /dev/shm carries hoccl's name and the survivor's pid.
// Survivors write their verdicts into a page shared by all processes, so a failing survivor is never hidden behind
// the killed rank's exit status.
//
// Usage: mp_registered [--model FILE] (HOCCL_CMA_MIN_BYTES and HOCCL_ALGO=single_copy are set here; with --model,
//        HOCCL_MODEL_FILE=FILE instead of HOCCL_ALGO: the tuner chooses, e.g. "a schedule, or single copy where every
//        rank registered" with tests/mp/kernel_copy_slow.json, and the same must hold on that path)
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "harness.h"

using namespace hoccl::test;

namespace {

struct Shared {
  std::atomic<int> failures{0};
  std::atomic<int> verdicts{0};
};

// A registered float buffer of `count` elements filled with `value`.
struct RegBuf {
  float* p = nullptr;
  void* handle = nullptr;
};

int makeBuf(hocclComm_t comm, int rank, size_t count, float value, RegBuf* b) {
  void* mem = nullptr;
  MP_CHECK(rank, hocclMemAlloc(&mem, count * sizeof(float)));
  b->p = static_cast<float*>(mem);
  for (size_t i = 0; i < count; ++i) b->p[i] = value + static_cast<float>(i % 16);
  MP_CHECK(rank, hocclCommRegister(comm, b->p, count * sizeof(float), &b->handle));
  return 0;
}

int inUse(int rank, int n, const hocclUniqueId& id) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  const size_t count = 1 << 20;
  RegBuf in, out;
  if (makeBuf(comm, rank, count, static_cast<float>(rank), &in) || makeBuf(comm, rank, count, -1, &out)) return 1;
  hocclResult_t callRc = hocclInternalError;
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the late peer
    callRc = hocclAllReduce(in.p, out.p, count, hocclFloat, hocclSum, comm, nullptr);
  } else {
    std::thread t([&] { callRc = hocclAllReduce(in.p, out.p, count, hocclFloat, hocclSum, comm, nullptr); });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const hocclResult_t dereg = hocclCommDeregister(comm, in.handle);
    const std::string deregMsg = hocclGetLastError(nullptr);
    const hocclResult_t freed = hocclMemFree(out.p);
    const std::string freeMsg = hocclGetLastError(nullptr);
    t.join();
    if (dereg != hocclInvalidUsage || deregMsg.find("in use") == std::string::npos)
      return fail(rank,
                  "deregistering a buffer in use gave " + std::string(hocclGetErrorString(dereg)) + ": " + deregMsg);
    if (freed != hocclInvalidUsage || freeMsg.find("in use") == std::string::npos)
      return fail(rank, "freeing a buffer in use gave " + std::string(hocclGetErrorString(freed)) + ": " + freeMsg);
  }
  if (callRc != hocclSuccess) return fail(rank, std::string("the all-reduce failed: ") + hocclGetErrorString(callRc));
  for (size_t i = 0; i < count; ++i) {
    const float expect = static_cast<float>(n * (n - 1) / 2) + n * static_cast<float>(i % 16);
    if (out.p[i] != expect)
      return fail(rank, "element " + std::to_string(i) + " is " + std::to_string(out.p[i]) + ", expected " +
                            std::to_string(expect));
  }
  MP_CHECK(rank, hocclCommDeregister(comm, in.handle));
  MP_CHECK(rank, hocclCommDeregister(comm, out.handle));
  MP_CHECK(rank, hocclMemFree(in.p));
  MP_CHECK(rank, hocclMemFree(out.p));
  if (hocclMemFree(in.p) != hocclInvalidArgument) return fail(rank, "freeing a block twice was not refused");
  MP_CHECK(rank, hocclCommDestroy(comm));
  return 0;
}

// hocclMemAlloc blocks mapped in this process, except those starting at `own1` and `own2` (this rank's own).
int blocksMapped(const void* own1, const void* own2) {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[4096];
  int count = 0;
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long start = 0;
    if (!std::strstr(line, "/memfd:hoccl-mem-") || std::sscanf(line, "%lx-", &start) != 1) continue;
    if (start != reinterpret_cast<uintptr_t>(own1) && start != reinterpret_cast<uintptr_t>(own2)) ++count;
  }
  std::fclose(f);
  return count;
}

// Entries of /dev/shm whose name contains "hoccl" and this process's pid (names carry the pid of the job's rank 0;
// other jobs on the machine are not counted).
int devShmEntries() {
  int count = 0;
  const std::string pid = std::to_string(getpid());
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::strstr(e->d_name, "hoccl") && std::strstr(e->d_name, pid.c_str())) ++count;
    closedir(d);
  }
  return count;
}

int killed(int rank, int n, const hocclUniqueId& id, Shared* shared) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  const size_t count = 4 << 20;
  RegBuf in, out;
  if (makeBuf(comm, rank, count, 1, &in) || makeBuf(comm, rank, count, 0, &out)) return 1;
  hocclResult_t rc = hocclSuccess;
  const auto start = std::chrono::steady_clock::now();
  int mappedBeforeKill = -1;
  for (int i = 0; i < 1000 && rc == hocclSuccess; ++i) {
    if (rank == 2 && i == 5) raise(SIGKILL);
    rc = hocclAllReduce(in.p, out.p, count, hocclFloat, hocclSum, comm, nullptr);
    if (i == 0) mappedBeforeKill = blocksMapped(in.p, out.p);
  }
  const int mappedAfterError = blocksMapped(in.p, out.p);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto verdict = [&](bool ok, const std::string& why) {
    if (!ok) {
      shared->failures++;
      fail(rank, why);
    }
    shared->verdicts++;
    return ok ? 0 : 1;
  };
  if (rc != hocclRemoteError)
    return verdict(false, std::string("expected hocclRemoteError after the kill, got ") + hocclGetErrorString(rc));
  if (std::string(hocclGetLastError(nullptr)).find("rank 2") == std::string::npos)
    return verdict(false, std::string("the error does not name rank 2: ") + hocclGetLastError(nullptr));
  volatile float sink = out.p[count - 1] + in.p[0];  // still mapped and readable
  (void)sink;
  if (mappedBeforeKill < 2)  // both peers' input and output blocks (n = 3)
    return verdict(false, "before the kill only " + std::to_string(mappedBeforeKill) +
                              " peer blocks were mapped: zero copy did not run");
  if (mappedAfterError != 0)
    return verdict(false, std::to_string(mappedAfterError) +
                              " peer blocks are still mapped after the failed call (the dead rank's memory is kept)");
  hocclCommAbort(comm);
  MP_CHECK(rank, hocclMemFree(in.p));
  MP_CHECK(rank, hocclMemFree(out.p));
  if (int left = blocksMapped(nullptr, nullptr))
    return verdict(false, std::to_string(left) + " hocclMemAlloc blocks are still mapped after abort and free");
  if (int left = devShmEntries()) return verdict(false, std::to_string(left) + " hoccl entries in /dev/shm");
  return verdict(secs < 60, "took " + std::to_string(secs) + " s");
}

}  // namespace

int main(int argc, char** argv) {
  setenv("HOCCL_CMA_MIN_BYTES", "1", 1);
  if (argc == 3 && std::string(argv[1]) == "--model") {
    setenv("HOCCL_MODEL_FILE", argv[2], 1);
    unsetenv("HOCCL_ALGO");
  } else if (argc == 1) {
    setenv("HOCCL_ALGO", "single_copy", 1);
  } else {
    std::fprintf(stderr, "usage: mp_registered [--model FILE]\n");
    return 2;
  }
  unsetenv("HOCCL_SHM_DISABLE");
  int rc1 = runRanks(2, inUse, 120);
  std::printf("mp_registered: in use: %s\n", rc1 == 0 ? "PASS" : "FAIL");
  auto* shared = new (mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) Shared;
  int rc2 = runRanks(
      3, [&](int rank, int n, const hocclUniqueId& id) { return killed(rank, n, id, shared); }, 120);
  const bool ok2 = shared->failures.load() == 0 && shared->verdicts.load() == 2 && (rc2 == 0 || rc2 == 128 + SIGKILL);
  std::printf("mp_registered: killed peer: %s (rc %d, %d verdicts, %d failures)\n", ok2 ? "PASS" : "FAIL", rc2,
              shared->verdicts.load(), shared->failures.load());
  return rc1 == 0 && ok2 ? 0 : 1;
}
