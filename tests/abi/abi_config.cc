/// @file abi_config.cc
/// ncclConfig_t through the public API of hoccl's libnccl.so.2, compiled against NVIDIA's nccl.h:
/// - a 2.17-layout config (40 bytes) placed right before a PROT_NONE page: the library must not read past its size;
/// - a wrong magic, a size smaller than the header, a bad blocking value: ncclInvalidArgument, a text that says what
///   to fix, and the output communicator untouched;
/// - blocking = 0 on two ranks: init returns ncclInProgress and ncclCommGetAsyncError is polled to ncclSuccess, then
///   the communicator works;
/// - ncclCommInitAll (three communicators, one grouped all-reduce) and ncclCommInitRankScalable with 1, 2 and 3 ids,
///   each created by the first rank of its share (NCCL's rule), and with an id that breaks that rule.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "abi_util.h"

using abi::check;
using abi::expectResult;

namespace {

/// ncclConfig_t as nccl.h 2.17 declared it.
struct ConfigV21700 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
};
static_assert(sizeof(ConfigV21700) == 40, "2.17 layout");

/// Two pages, the second PROT_NONE; returns where an object of `bytes` must start to end at the guard.
struct GuardedPage {
  char* base = nullptr;
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  GuardedPage() {
    void* p = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base = static_cast<char*>(p);
    if (mprotect(base + page, page, PROT_NONE) != 0) std::abort();
  }
  ~GuardedPage() { munmap(base, 2 * page); }
  void* endAligned(size_t bytes) { return base + page - bytes; }
};

void singleRankConfigs(const ncclUniqueId& id) {
  ncclComm_t sentinel = reinterpret_cast<ncclComm_t>(0x1234);

  // Wrong magic.
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0xdeadbeef;
  ncclComm_t comm = sentinel;
  expectResult(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument, "init with a wrong magic");
  check(std::strstr(ncclGetLastError(nullptr), "NCCL_CONFIG_INITIALIZER") != nullptr, "wrong-magic text: %s",
        ncclGetLastError(nullptr));
  check(comm == sentinel, "a rejected config changed the output communicator");

  // Size smaller than the header.
  ncclConfig_t tiny = NCCL_CONFIG_INITIALIZER;
  tiny.size = 8;
  expectResult(ncclCommInitRankConfig(&comm, 1, id, 0, &tiny), ncclInvalidArgument, "init with size 8");
  check(std::strstr(ncclGetLastError(nullptr), "size") != nullptr, "tiny-size text: %s", ncclGetLastError(nullptr));

  // blocking must be 0, 1 or undefined.
  ncclConfig_t weird = NCCL_CONFIG_INITIALIZER;
  weird.blocking = 7;
  expectResult(ncclCommInitRankConfig(&comm, 1, id, 0, &weird), ncclInvalidArgument, "init with blocking = 7");
  check(std::strstr(ncclGetLastError(nullptr), "blocking") != nullptr, "blocking text: %s", ncclGetLastError(nullptr));
  check(comm == sentinel, "a rejected config changed the output communicator");

  // An old 40-byte config ending exactly at a PROT_NONE page: any read past its size would crash.
  GuardedPage guard;
  auto* old = static_cast<ConfigV21700*>(guard.endAligned(sizeof(ConfigV21700)));
  *old = ConfigV21700{sizeof(ConfigV21700),   0xcafebeef,
                      NCCL_VERSION(2, 17, 0), 1,
                      NCCL_CONFIG_UNDEF_INT,  NCCL_CONFIG_UNDEF_INT,
                      NCCL_CONFIG_UNDEF_INT,  nullptr};
  comm = nullptr;
  if (expectResult(ncclCommInitRankConfig(&comm, 1, id, 0, reinterpret_cast<ncclConfig_t*>(old)), ncclSuccess,
                   "init with a 2.17-size config")) {
    int n = 0;
    expectResult(ncclCommCount(comm, &n), ncclSuccess, "ncclCommCount");
    check(n == 1, "count %d", n);
    float x = 2.5f, y = 0.0f;
    expectResult(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess, "1-rank allreduce");
    check(y == 2.5f, "1-rank allreduce gave %g", y);
    expectResult(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
  }
}

void nonBlockingRank(int r, const ncclUniqueId& id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "abi-nonblocking";
  ncclComm_t comm = nullptr;
  const ncclResult_t res = ncclCommInitRankConfig(&comm, 2, id, r, &config);
  if (!expectResult(res, ncclInProgress, "non-blocking ncclCommInitRankConfig")) return;
  check(comm != nullptr, "non-blocking init returned no handle");
  ncclResult_t state = ncclInProgress;
  int polls = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    if (!expectResult(ncclCommGetAsyncError(comm, &state), ncclSuccess, "ncclCommGetAsyncError")) return;
    ++polls;
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!expectResult(state, ncclSuccess, "async state after polling")) return;
  double v = r + 1.5, sum = 0;
  ncclResult_t ar = ncclAllReduce(&v, &sum, 1, ncclFloat64, ncclSum, comm, nullptr);
  // A non-blocking communicator may return InProgress from a collective; then poll until it completes.
  while (ar == ncclInProgress) {
    ncclCommGetAsyncError(comm, &ar);
    std::this_thread::yield();
  }
  expectResult(ar, ncclSuccess, "ncclAllReduce on a non-blocking communicator");
  check(sum == 1.5 + 2.5, "non-blocking allreduce gave %g after %d polls", sum, polls);
  ncclResult_t fin = ncclCommFinalize(comm);
  while (fin == ncclInProgress) {
    ncclCommGetAsyncError(comm, &fin);
    std::this_thread::yield();
  }
  expectResult(fin, ncclSuccess, "ncclCommFinalize (non-blocking)");
  expectResult(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
}

// ncclCommInitAll: three communicators in one process, driven inside one group.
void initAllInOneProcess() {
  ncclComm_t comms[3] = {};
  if (!expectResult(ncclCommInitAll(comms, 3, nullptr), ncclSuccess, "ncclCommInitAll")) return;
  std::vector<float> in[3], out[3];
  expectResult(ncclGroupStart(), ncclSuccess, "ncclGroupStart");
  for (int i = 0; i < 3; ++i) {
    int rank = -1;
    ncclCommUserRank(comms[i], &rank);
    check(rank == i, "ncclCommInitAll: comms[%d] has rank %d", i, rank);
    in[i].assign(101, float(i + 1));
    out[i].assign(101, 0.0f);
    expectResult(ncclAllReduce(in[i].data(), out[i].data(), 101, ncclFloat32, ncclSum, comms[i], nullptr), ncclSuccess,
                 "ncclAllReduce (grouped)");
  }
  expectResult(ncclGroupEnd(), ncclSuccess, "ncclGroupEnd");
  for (int i = 0; i < 3; ++i) check(out[i][100] == 6.0f, "InitAll allreduce on comm %d gave %g", i, out[i][100]);
  for (ncclComm_t c : comms) expectResult(ncclCommDestroy(c), ncclSuccess, "ncclCommDestroy");
}

// ncclCommInitRankScalable with nIds ids over nranks forked ranks, with NCCL's semantics: rank r joins id
// floor(r * nIds / nranks), and the first rank of each share creates that id (ncclGetUniqueId in its own process)
// and publishes it in shared memory; every rank then passes all ids. Checks an all-reduce and a split on the one
// communicator the roots make together. `breakShare` >= 0: that share's id is a copy of id 0 instead (not created by
// its first rank): its first rank must fail at once with a clear error, and no rank may hang.
int scalable(int nranks, int nIds, int breakShare = -1) {
  struct Shared {
    std::atomic<int> ready[8];
    ncclUniqueId ids[8];
  };
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED || nIds > 8) return nranks;
  for (auto& r : shared->ready) r.store(0);
  auto firstOf = [&](int k) { return (k * nranks + nIds - 1) / nIds; };
  int bad = abi::runRanks(nranks, 90, [&](int r, const ncclUniqueId&) {
    if (breakShare >= 0) setenv("HOCCL_TIMEOUT", "4", 1);
    const int k = r * nIds / nranks;
    check(firstOf(k) <= r && (k + 1 == nIds || r < firstOf(k + 1)), "rank %d is not in the share of id %d", r, k);
    if (r == firstOf(k)) {
      if (!expectResult(ncclGetUniqueId(&shared->ids[k]), ncclSuccess, "ncclGetUniqueId")) return;
      shared->ready[k].store(1, std::memory_order_release);
    }
    ncclUniqueId ids[8];
    for (int i = 0; i < nIds; ++i) {
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!shared->ready[i].load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (!check(shared->ready[i].load() == 1, "id %d was never published", i)) return;
      ids[i] = i == breakShare ? shared->ids[0] : shared->ids[i];
    }
    ncclComm_t comm = nullptr;
    const ncclResult_t res = ncclCommInitRankScalable(&comm, nranks, r, nIds, ids, nullptr);
    if (breakShare >= 0) {
      check(res != ncclSuccess, "init with id %d not created by its first rank succeeded on rank %d", breakShare, r);
      if (r == firstOf(breakShare))
        check(res == ncclInvalidUsage && std::strstr(ncclGetLastError(nullptr), "must have created") != nullptr,
              "rank %d (first of the broken share) got %d: %s", r, static_cast<int>(res), ncclGetLastError(nullptr));
      return;
    }
    if (!expectResult(res, ncclSuccess, "ncclCommInitRankScalable")) return;
    int count = 0, me = -1;
    expectResult(ncclCommCount(comm, &count), ncclSuccess, "ncclCommCount");
    expectResult(ncclCommUserRank(comm, &me), ncclSuccess, "ncclCommUserRank");
    check(count == nranks && me == r, "scalable comm has %d ranks, this is %d (want %d, %d)", count, me, nranks, r);
    int64_t v = 10 * (r + 1), sum = 0;
    expectResult(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, nullptr), ncclSuccess, "ncclAllReduce");
    check(sum == 5 * nranks * (nranks + 1), "scalable init (%d ids) all-reduce gave %lld", nIds,
          static_cast<long long>(sum));
    // A split goes over the same bootstrap tree: odd and even ranks.
    ncclComm_t half = nullptr;
    if (expectResult(ncclCommSplit(comm, r % 2, r, &half, nullptr), ncclSuccess, "ncclCommSplit")) {
      int64_t one = 1, n = 0;
      expectResult(ncclAllReduce(&one, &n, 1, ncclInt64, ncclSum, half, nullptr), ncclSuccess, "split all-reduce");
      check(n == (nranks + 1 - r % 2) / 2, "split of %d ranks: color %d has %lld ranks", nranks, r % 2,
            static_cast<long long>(n));
      expectResult(ncclCommDestroy(half), ncclSuccess, "ncclCommDestroy(split)");
    }
    ncclResult_t async = ncclInternalError;
    expectResult(ncclCommGetAsyncError(comm, &async), ncclSuccess, "ncclCommGetAsyncError");
    check(async == ncclSuccess, "async error %d on a healthy communicator", static_cast<int>(async));
    expectResult(ncclCommDestroy(comm), ncclSuccess, "ncclCommDestroy");
  });
  munmap(shared, sizeof(Shared));
  return bad;
}

}  // namespace

int main() {
  // The single-rank checks run in a child too, so that a crash (the guard page) is reported, not fatal.
  int bad = abi::runRanks(1, 60, [](int, const ncclUniqueId& id) { singleRankConfigs(id); });
  bad += abi::runRanks(2, 90, nonBlockingRank);
  bad += abi::runRanks(1, 60, [](int, const ncclUniqueId&) { initAllInOneProcess(); });
  // ncclCommInitRankScalable: 1, 2 and 3 ids over 3 ranks (every id served by the first rank of its share), 3 ids
  // over 7 ranks, and an id not created by its share's first rank (a clear error, no hang).
  bad += scalable(3, 1) + scalable(3, 2) + scalable(3, 3) + scalable(7, 3) + scalable(3, 2, 1);
  std::printf("%d processes passed, %d failed\n", 3 + 2 + 1 + 3 + 3 + 3 + 7 + 3 - bad, bad);
  return bad == 0 ? 0 : 1;
}
