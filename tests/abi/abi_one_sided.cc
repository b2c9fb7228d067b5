/// @file abi_one_sided.cc
/// ncclPutSignal / ncclSignal / ncclWaitSignal through hoccl's libnccl.so.2, compiled against NVIDIA's nccl.h 2.32.3,
/// with N real processes (argument: the rank count):
/// - data: every rank puts random bytes into every rank's window (its own included) at random offsets with odd
///   counts of several types (0 included), signalling each put, plus plain signals on another index; each rank waits
///   for all of them with one descriptor list, then compares every byte of its window (the bytes nobody wrote too)
///   with a reference it builds from the same random plan. Windows differ in size per rank; three rounds on
///   different signal indices and contexts, so that consumed signals are not counted twice.
/// - refusals, each changing nothing (the target's guard bytes are checked afterwards): a put past the end of the
///   peer's part, an offset that overflows, a peer out of range, bad sigIdx / ctx / flags, an unknown or deregistered
///   window, a window of another communicator, and a window that is not ncclMemAlloc memory.
/// - failures: with NCCL_TIMEOUT=2 a wait for a signal that never comes is ncclTimeout naming the peer and the
///   signal index; a wait on a peer that exited is ncclRemoteError naming it (before the timeout); ranks on
///   different hosts (HOCCL_HOSTID) are refused with ncclInvalidUsage saying to use ncclSend/ncclRecv; a wait
///   leaves at once when another thread aborts the communicator.
#include <chrono>
#include <thread>

#include "abi_util.h"

using abi::check;
using abi::expectResult;

namespace {

constexpr int kRounds = 3;
constexpr int kPutsPerPair = 5;

bool contains(const char* text, const char* needle) { return text && std::strstr(text, needle) != nullptr; }

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Size of rank r's part of the window: different on every rank, not a multiple of anything.
size_t partBytes(int r) { return 6000 + 977 * static_cast<size_t>(r); }

/// One put of the plan: `bytes` random bytes (from `seed`) at `offset` of the target's part.
struct Put {
  ncclDataType_t type;
  size_t count;
  size_t offset;
  uint64_t seed;
};

/// The puts sender s makes into target t in round `round`: all inside the target's region for s (its n-th share of
/// the part), so that the order between senders does not matter.
std::vector<Put> plan(int round, int s, int t, int n) {
  static const ncclDataType_t types[] = {ncclInt8, ncclFloat16, ncclInt32, ncclFloat64, ncclBfloat16};
  const size_t region = partBytes(t) / static_cast<size_t>(n);
  const size_t begin = region * static_cast<size_t>(s);
  std::vector<Put> puts;
  for (int k = 0; k < kPutsPerPair; ++k) {
    const uint64_t h = mix((static_cast<uint64_t>(round) << 48) ^ (static_cast<uint64_t>(s) << 32) ^
                           (static_cast<uint64_t>(t) << 16) ^ static_cast<uint64_t>(k));
    const ncclDataType_t type = types[h % 5];
    const size_t elem = abi::typeSize(type);
    size_t count = k == 0 ? 0 : (h >> 8) % (region / elem / 2 + 1);
    if (k == 1) count = 1;
    const size_t offset = begin + (h >> 24) % (region - count * elem + 1);
    puts.push_back(Put{type, count, offset, h});
  }
  return puts;
}

void fillRandom(char* p, size_t bytes, uint64_t seed) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>(mix(seed + i) >> 56);
}

void barrier(ncclComm_t comm) {
  int one = 1, sum = 0;
  expectResult(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess, "barrier");
}

void dataRounds(int rank, int n, ncclComm_t comm, ncclWindow_t win, char* part, std::vector<char>& reference) {
  for (int round = 0; round < kRounds; ++round) {
    const int sigIdx = round % 8, ctx = round % 4, plainIdx = (round + 5) % 8;
    for (int step = 0; step < n; ++step) {
      const int t = (rank + step) % n;  // every rank starts with a different target
      for (const Put& p : plan(round, rank, t, n)) {
        std::vector<char> src(p.count * abi::typeSize(p.type) + 1);
        fillRandom(src.data(), src.size() - 1, p.seed);
        expectResult(ncclPutSignal(p.count ? src.data() : nullptr, p.count, p.type, t, win, p.offset, sigIdx, ctx, 0,
                                   comm, nullptr),
                     ncclSuccess, "put");
      }
      expectResult(ncclSignal(t, plainIdx, ctx, 0, comm, nullptr), ncclSuccess, "plain signal");
    }
    std::vector<ncclWaitSignalDesc_t> descs;
    for (int s = 0; s < n; ++s) {
      descs.push_back(ncclWaitSignalDesc_t{kPutsPerPair, s, sigIdx, ctx});
      descs.push_back(ncclWaitSignalDesc_t{1, s, plainIdx, ctx});
    }
    expectResult(ncclWaitSignal(static_cast<int>(descs.size()), descs.data(), comm, nullptr), ncclSuccess, "wait");
    for (int s = 0; s < n; ++s) {
      for (const Put& p : plan(round, s, rank, n))
        fillRandom(&reference[p.offset], p.count * abi::typeSize(p.type), p.seed);
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < reference.size(); ++i)
      if (part[i] != reference[i] && bad++ == 0) first = i;
    check(bad == 0, "round %d: %zu of %zu window bytes differ from the reference, first at byte %zu", round, bad,
          reference.size(), first);
    barrier(comm);  // every rank has checked before the next round writes
  }
}

void refusals(int rank, int n, ncclComm_t comm, ncclWindow_t win, char* part, const std::vector<char>& reference) {
  const int peer = (rank + 1) % n;
  char src[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const size_t end = partBytes(peer);
  expectResult(ncclPutSignal(src, 4, ncclInt8, peer, win, end - 3, 0, 0, 0, comm, nullptr), ncclInvalidArgument,
               "put past the end of the peer's part");
  check(contains(ncclGetLastError(comm), "does not fit"), "past-the-end text: %s", ncclGetLastError(comm));
  expectResult(ncclPutSignal(src, 2, ncclFloat64, peer, win, SIZE_MAX - 4, 0, 0, 0, comm, nullptr), ncclInvalidArgument,
               "offset that overflows");
  expectResult(ncclPutSignal(src, 1, ncclInt8, n, win, 0, 0, 0, 0, comm, nullptr), ncclInvalidArgument,
               "peer out of range");
  expectResult(ncclPutSignal(src, 1, ncclInt8, -1, win, 0, 0, 0, 0, comm, nullptr), ncclInvalidArgument,
               "negative peer");
  expectResult(ncclPutSignal(src, 1, ncclInt8, peer, win, 0, 8, 0, 0, comm, nullptr), ncclInvalidArgument, "sigIdx 8");
  expectResult(ncclPutSignal(src, 1, ncclInt8, peer, win, 0, 0, 4, 0, comm, nullptr), ncclInvalidArgument, "ctx 4");
  expectResult(ncclPutSignal(src, 1, ncclInt8, peer, win, 0, 0, 0, 1, comm, nullptr), ncclInvalidArgument, "flags 1");
  expectResult(ncclSignal(peer, -1, 0, 0, comm, nullptr), ncclInvalidArgument, "signal with sigIdx -1");
  expectResult(ncclPutSignal(src, 1, ncclInt8, peer, reinterpret_cast<ncclWindow_t>(src), 0, 0, 0, 0, comm, nullptr),
               ncclInvalidArgument, "a window handle that is no window");
  ncclWaitSignalDesc_t bad = {1, n, 0, 0};
  expectResult(ncclWaitSignal(1, &bad, comm, nullptr), ncclInvalidArgument, "wait on a peer out of range");
  bad = {-1, peer, 0, 0};
  expectResult(ncclWaitSignal(1, &bad, comm, nullptr), ncclInvalidArgument, "wait for a negative count");
  expectResult(ncclWaitSignal(0, nullptr, comm, nullptr), ncclSuccess, "wait for nothing");

  // A window of ordinary memory: the peer's part cannot be mapped (a put to oneself still works).
  std::vector<char> plain(4096, 'p');
  ncclWindow_t plainWin = nullptr;
  expectResult(ncclCommWindowRegister(comm, plain.data(), plain.size(), &plainWin, NCCL_WIN_DEFAULT), ncclSuccess,
               "register an ordinary-memory window");
  if (n > 1) {
    expectResult(ncclPutSignal(src, 8, ncclInt8, peer, plainWin, 0, 0, 0, 0, comm, nullptr), ncclInvalidUsage,
                 "put into ordinary memory of a peer");
    check(contains(ncclGetLastError(comm), "ncclMemAlloc"), "ordinary-memory text: %s", ncclGetLastError(comm));
  }
  expectResult(ncclPutSignal(src, 8, ncclInt8, rank, plainWin, 100, 7, 3, 0, comm, nullptr), ncclSuccess,
               "put into this rank's own ordinary window");
  ncclWaitSignalDesc_t self = {1, rank, 7, 3};
  expectResult(ncclWaitSignal(1, &self, comm, nullptr), ncclSuccess, "wait for its own signal");
  check(std::memcmp(plain.data() + 100, src, 8) == 0 && plain[99] == 'p' && plain[108] == 'p', "own put's bytes");
  expectResult(ncclCommWindowDeregister(comm, plainWin), ncclSuccess, "deregister the ordinary window");
  expectResult(ncclPutSignal(src, 1, ncclInt8, rank, plainWin, 0, 0, 0, 0, comm, nullptr), ncclInvalidArgument,
               "put into a deregistered window");

  barrier(comm);  // every refused put has been tried: nothing may have changed
  check(std::memcmp(part, reference.data(), reference.size()) == 0, "the refused calls changed this rank's window");
}

void dataAndRefusals(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  if (!expectResult(ncclCommInitRank(&comm, n, id, rank), ncclSuccess, "init")) return;
  ncclWaitSignalDesc_t early = {0, 0, 0, 0};
  expectResult(ncclSignal(0, 0, 0, 0, comm, nullptr), ncclInvalidUsage, "a signal before any window");
  check(contains(ncclGetLastError(comm), "window"), "no-window text: %s", ncclGetLastError(comm));
  (void)early;
  void* mem = nullptr;
  const size_t bytes = partBytes(rank);
  if (!expectResult(ncclMemAlloc(&mem, bytes), ncclSuccess, "ncclMemAlloc")) return;
  char* part = static_cast<char*>(mem);
  std::vector<char> reference(bytes);
  for (size_t i = 0; i < bytes; ++i) reference[i] = part[i] = static_cast<char>(i * 7 + rank);
  ncclWindow_t win = nullptr;
  if (!expectResult(ncclCommWindowRegister(comm, part, bytes, &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess,
                    "window register"))
    return;
  dataRounds(rank, n, comm, win, part, reference);
  refusals(rank, n, comm, win, part, reference);

  // A window of another communicator is refused.
  ncclComm_t dup = nullptr;
  if (expectResult(ncclCommSplit(comm, 0, rank, &dup, nullptr), ncclSuccess, "split")) {
    expectResult(ncclPutSignal(part, 1, ncclInt8, rank, win, 0, 0, 0, 0, dup, nullptr), ncclInvalidArgument,
                 "a window of another communicator");
    expectResult(ncclCommDestroy(dup), ncclSuccess, "destroy the split");
  }
  expectResult(ncclCommWindowDeregister(comm, win), ncclSuccess, "window deregister");
  expectResult(ncclCommDestroy(comm), ncclSuccess, "destroy");
  expectResult(ncclMemFree(mem), ncclSuccess, "ncclMemFree");
}

// Rank 0 waits for a signal that rank 1 never sends (ncclTimeout), then tells rank 1 to exit and waits again: a
// wait on a peer that exited is ncclRemoteError, well before the timeout.
void failures(int rank, const ncclUniqueId& id) {
  setenv("NCCL_TIMEOUT", "2", 1);
  ncclComm_t comm = nullptr;
  if (!expectResult(ncclCommInitRank(&comm, 2, id, rank), ncclSuccess, "init")) return;
  void* mem = nullptr;
  expectResult(ncclMemAlloc(&mem, 4096), ncclSuccess, "ncclMemAlloc");
  ncclWindow_t win = nullptr;
  expectResult(ncclCommWindowRegister(comm, mem, 4096, &win, NCCL_WIN_DEFAULT), ncclSuccess, "window register");
  if (rank == 1) {
    // Waits (each wait giving up after 2 s) until rank 0's first wait timed out and rank 0 said so with a signal,
    // then leaves without a word while rank 0 waits again.
    ncclWaitSignalDesc_t told = {1, 0, 6, 1};
    ncclResult_t r;
    while ((r = ncclWaitSignal(1, &told, comm, nullptr)) == ncclTimeout) {
    }
    check(r == ncclSuccess, "rank 1 waiting for rank 0's word: %s", ncclGetLastError(comm));
    std::printf("[rank 1] %d checks passed, %d failed\n", abi::passes(), abi::failures());
    std::fflush(stdout);
    _exit(abi::failures() == 0 ? 0 : 1);
  }
  ncclWaitSignalDesc_t desc = {2, 1, 5, 2};
  const auto start = std::chrono::steady_clock::now();
  expectResult(ncclWaitSignal(1, &desc, comm, nullptr), ncclTimeout, "wait for signals that never come");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const char* text = ncclGetLastError(comm);
  check(contains(text, "rank 1") && contains(text, "signal index 5") && contains(text, "0 of 2"),
        "timeout text names the peer and the signal: %s", text);
  check(took >= 1.5 && took < 3.9, "the wait gave up after %.1f s (NCCL_TIMEOUT=2)", took);
  expectResult(ncclSignal(1, 6, 1, 0, comm, nullptr), ncclSuccess, "tell rank 1 to leave");
  const auto again = std::chrono::steady_clock::now();
  const ncclResult_t r = ncclWaitSignal(1, &desc, comm, nullptr);  // rank 1 exits during this wait
  check(r == ncclRemoteError, "a wait on a peer that exited returned %d: %s", static_cast<int>(r),
        ncclGetLastError(comm));
  check(contains(ncclGetLastError(comm), "rank 1"), "dead-peer text names it: %s", ncclGetLastError(comm));
  const double second = std::chrono::duration<double>(std::chrono::steady_clock::now() - again).count();
  check(second < 2.0, "the dead peer was reported after %.1f s, before NCCL_TIMEOUT", second);
  ncclCommAbort(comm);
}

// Two ranks that say they run on different hosts (HOCCL_HOSTID): puts, signals and waits between them are refused
// with a text that says why and what to use; the two-sided calls still work.
void otherHosts(int rank, const ncclUniqueId& id) {
  setenv("HOCCL_HOSTID", rank == 0 ? "one-sided-host-a" : "one-sided-host-b", 1);
  ncclComm_t comm = nullptr;
  if (!expectResult(ncclCommInitRank(&comm, 2, id, rank), ncclSuccess, "init")) return;
  void* mem = nullptr;
  expectResult(ncclMemAlloc(&mem, 4096), ncclSuccess, "ncclMemAlloc");
  std::memset(mem, 'w', 4096);
  ncclWindow_t win = nullptr;
  expectResult(ncclCommWindowRegister(comm, mem, 4096, &win, NCCL_WIN_DEFAULT), ncclSuccess, "window register");
  char src[8] = {};
  expectResult(ncclPutSignal(src, 8, ncclInt8, 1 - rank, win, 0, 0, 0, 0, comm, nullptr), ncclInvalidUsage,
               "put to another host");
  check(contains(ncclGetLastError(comm), "another host") && contains(ncclGetLastError(comm), "ncclSend"),
        "other-host text: %s", ncclGetLastError(comm));
  expectResult(ncclSignal(1 - rank, 0, 0, 0, comm, nullptr), ncclInvalidUsage, "signal to another host");
  ncclWaitSignalDesc_t desc = {1, 1 - rank, 0, 0};
  expectResult(ncclWaitSignal(1, &desc, comm, nullptr), ncclInvalidUsage, "wait on another host");
  expectResult(ncclPutSignal(src, 8, ncclInt8, rank, win, 8, 0, 0, 0, comm, nullptr), ncclSuccess, "put to itself");
  desc = {1, rank, 0, 0};
  expectResult(ncclWaitSignal(1, &desc, comm, nullptr), ncclSuccess, "wait on itself");
  barrier(comm);
  const char* p = static_cast<const char*>(mem);
  bool same = p[7] == 'w' && p[16] == 'w';
  for (int i = 8; i < 16; ++i) same = same && p[i] == 0;
  check(same, "only this rank's own put changed its window");
  expectResult(ncclCommWindowDeregister(comm, win), ncclSuccess, "window deregister");
  expectResult(ncclCommDestroy(comm), ncclSuccess, "destroy");
  expectResult(ncclMemFree(mem), ncclSuccess, "ncclMemFree");
}

// One rank waits for a signal that never comes while another thread aborts the communicator: the wait returns at
// once (not at the timeout) with an error, and the abort returns.
void abortDuringWait(int rank, const ncclUniqueId& id) {
  setenv("NCCL_TIMEOUT", "30", 1);
  ncclComm_t comm = nullptr;
  if (!expectResult(ncclCommInitRank(&comm, 1, id, rank), ncclSuccess, "init")) return;
  void* mem = nullptr;
  expectResult(ncclMemAlloc(&mem, 4096), ncclSuccess, "ncclMemAlloc");
  ncclWindow_t win = nullptr;
  expectResult(ncclCommWindowRegister(comm, mem, 4096, &win, NCCL_WIN_DEFAULT), ncclSuccess, "window register");
  std::thread aborter([comm] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    expectResult(ncclCommAbort(comm), ncclSuccess, "abort from another thread");
  });
  ncclWaitSignalDesc_t desc = {1, 0, 0, 0};
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t r = ncclWaitSignal(1, &desc, comm, nullptr);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  check(r != ncclSuccess && r != ncclTimeout && took < 5.0,
        "a wait on an aborted communicator returned %d after %.1f s", static_cast<int>(r), took);
  expectResult(ncclMemFree(mem), ncclSuccess, "ncclMemFree");
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2;
  int bad = abi::runRanks(n, 60, [n](int rank, const ncclUniqueId& id) { dataAndRefusals(rank, n, id); });
  if (n == 2)
    bad += abi::runRanks(2, 60, failures) + abi::runRanks(2, 60, otherHosts) + abi::runRanks(1, 60, abortDuringWait);
  std::printf("%s\n", bad == 0 ? "abi_one_sided: all ranks passed" : "abi_one_sided: FAILED");
  return bad == 0 ? 0 : 1;
}
