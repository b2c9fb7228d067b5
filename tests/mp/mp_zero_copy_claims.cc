// Zero copy's piece claims (issue 16, transports/shm/shm_zero_copy.cc): the registered all-reduce hands the pieces
// of the message to whichever rank asks first (its own block's first, then the others'), from counters in the arena
// that start over with every call.
// Checked, on hocclMemAlloc buffers registered on every rank:
//  - every piece is reduced exactly once: sums of random doubles against a double-precision reference, in place (a
//    piece reduced twice comes out doubled or tripled, since its inputs then already hold the sum; a skipped piece
//    keeps the input) and out of place into an output filled with NaN (a skipped piece stays NaN), several calls in a
//    row (a counter that did not start over would skip the next call's pieces), odd counts (a short last piece),
//    one buffer pair misaligned by an element, streamed (8 MiB) and not (2.3 MiB);
//  - uneven timing: in the stalled calls the last rank's own input is protected against it (mprotect; the peers read
//    it through their own mappings), so its first claimed piece faults and the handler holds it for 300 ms before
//    giving the pages back, while the others take the rest. Each rank counts the
//    bytes of the pieces it claimed (the byte counters: sent to each peer = claimed); the stopped rank must have
//    claimed at most a quarter of the message, and the ranks together exactly the message (which also shows that
//    zero copy ran: the cross-memory path counts otherwise).
// With 2 ranks the sums are exact whoever adds; with 3 the order of the adds depends on the claimer (a few ulps).
//
// Usage: mp_zero_copy_claims --ranks N (HOCCL_CMA_MIN_BYTES and HOCCL_ALGO are set here)
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "harness.h"

using namespace hoccl::test;

namespace {

struct Case {
  size_t count;  // doubles
  bool inPlace;  // sendbuff == recvbuff
  bool stalled;  // the last rank is stopped once the first piece is out
  size_t shift;  // elements the buffers start past the allocation (misaligned)
};

constexpr Case kCases[] = {
    {(size_t{1} << 20) + 7, true, true, 1},   // 8 MiB + 56 B: 65 pieces, streamed, misaligned
    {(size_t{1} << 20) + 7, false, true, 0},  //
    {300001, true, false, 0},                 // 2.3 MiB: 19 pieces, not streamed
    {300001, false, false, 1},                //
    {(size_t{1} << 20) + 7, true, false, 0},  //
};

// Rank r's input of case c: doubles in (-1, 1), none zero (a piece written over an input must change it).
std::vector<double> inputOf(size_t c, int r, size_t count) {
  std::mt19937_64 rng(1000003 * (c + 1) + static_cast<uint64_t>(r));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(count);
  for (double& x : v) {
    x = dist(rng);
    if (x == 0) x = 0.25;
  }
  return v;
}

// The stall: before a stalled call the last rank's own input pages are made inaccessible to that rank only (the
// peers read them through their own mappings). Its first read of a piece it claimed faults; the handler waits 300 ms
// before it gives the pages back, and the others take the remaining pieces meanwhile. Any other fault is a crash.
char* volatile gStallBegin = nullptr;
size_t gStallBytes = 0;
volatile sig_atomic_t gStalls = 0;

void onFault(int, siginfo_t* info, void*) {
  char* at = static_cast<char*>(info->si_addr);
  char* begin = gStallBegin;
  if (!begin || at < begin || at >= begin + gStallBytes) {
    signal(SIGSEGV, SIG_DFL);  // not ours: the access faults again and the process dies as it would have
    return;
  }
  const timespec stall{0, 300 * 1000 * 1000};
  nanosleep(&stall, nullptr);
  mprotect(begin, gStallBytes, PROT_READ | PROT_WRITE);
  gStallBegin = nullptr;
  gStalls = gStalls + 1;
}

// Protects the whole pages of [p, p+bytes) against this process until the first fault there (or unstall()).
int stall(int rank, void* p, size_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  gStallBytes = b - a;
  gStallBegin = reinterpret_cast<char*>(a);
  if (mprotect(gStallBegin, gStallBytes, PROT_NONE) != 0)
    return fail(rank, "mprotect: " + std::string(strerror(errno)));
  return 0;
}

void unstall() {
  if (char* begin = gStallBegin) {
    gStallBegin = nullptr;
    mprotect(begin, gStallBytes, PROT_READ | PROT_WRITE);
  }
}

unsigned long long sentIntraHost(hocclComm_t comm) {
  hocclCommCounters_t c{};
  if (hocclCommGetCounters(comm, &c) != hocclSuccess) return ~0ull;
  return c.bytesSent[hocclLinkIntraHost];
}

int rankBody(int rank, int n, const hocclUniqueId& id) {
  hocclComm_t comm;
  MP_CHECK(rank, hocclCommInitRank(&comm, n, id, rank));
  struct sigaction sa {};
  sa.sa_sigaction = onFault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, nullptr) != 0) return fail(rank, "sigaction failed");
  size_t maxCount = 0;
  for (const Case& c : kCases) maxCount = std::max(maxCount, c.count + c.shift);
  void *inMem = nullptr, *outMem = nullptr, *inHandle = nullptr, *outHandle = nullptr;
  MP_CHECK(rank, hocclMemAlloc(&inMem, maxCount * sizeof(double)));
  MP_CHECK(rank, hocclMemAlloc(&outMem, maxCount * sizeof(double)));
  MP_CHECK(rank, hocclCommRegister(comm, inMem, maxCount * sizeof(double), &inHandle));
  MP_CHECK(rank, hocclCommRegister(comm, outMem, maxCount * sizeof(double), &outHandle));
  const int slow = n - 1;
  for (size_t ci = 0; ci < std::size(kCases); ++ci) {
    const Case& c = kCases[ci];
    const std::string what = "case " + std::to_string(ci) + " (" + std::to_string(c.count) + " doubles, " +
                             (c.inPlace ? "in place" : "out of place") + (c.stalled ? ", stalled" : "") + ")";
    double* in = static_cast<double*>(inMem) + c.shift;
    double* out = c.inPlace ? in : static_cast<double*>(outMem) + c.shift;
    std::vector<std::vector<double>> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(inputOf(ci, r, c.count));
    std::memcpy(in, inputs[rank].data(), c.count * sizeof(double));
    if (!c.inPlace)
      for (size_t i = 0; i < c.count; ++i) out[i] = std::nan("");
    // Every rank ready before the call, so that the stall falls into the copies.
    int token = 1;
    MP_CHECK(rank, hocclAllReduce(&token, &token, 1, hocclInt32, hocclSum, comm, nullptr));
    const unsigned long long sentBefore = sentIntraHost(comm);
    const int stallsBefore = gStalls;
    if (c.stalled && rank == slow && stall(rank, in, c.count * sizeof(double))) return 1;
    const hocclResult_t rc = hocclAllReduce(in, out, c.count, hocclDouble, hocclSum, comm, nullptr);
    unstall();  // when this rank claimed no piece, it never read its input
    if (rc != hocclSuccess)
      return fail(rank, what + ": " + hocclGetErrorString(rc) + ": " + hocclGetLastError(nullptr));
    // Each rank counted its claimed pieces' bytes once per peer it sent them to.
    unsigned long long claimed[8] = {};
    claimed[rank] = (sentIntraHost(comm) - sentBefore) / static_cast<unsigned long long>(n - 1);
    MP_CHECK(rank, hocclAllReduce(claimed, claimed, 8, hocclUint64, hocclSum, comm, nullptr));
    size_t bad = 0, firstBad = 0;
    for (size_t i = 0; i < c.count; ++i) {
      double expect = 0, magnitude = 0;
      for (int r = 0; r < n; ++r) {
        expect += inputs[r][i];
        magnitude += std::fabs(inputs[r][i]);
      }
      const double slack = n == 2 ? 0.0 : 8 * DBL_EPSILON * magnitude;
      if (!(std::fabs(out[i] - expect) <= slack) && bad++ == 0) firstBad = i;
    }
    if (bad) {
      const size_t i = firstBad;
      double expect = 0;
      for (int r = 0; r < n; ++r) expect += inputs[r][i];
      return fail(rank, what + ": " + std::to_string(bad) + " wrong elements; element " + std::to_string(i) +
                            " (piece " + std::to_string(i * sizeof(double) / (128 << 10)) + ") is " +
                            std::to_string(out[i]) + ", expected " + std::to_string(expect) +
                            (std::fabs(out[i] - 2 * expect) < 1e-9 || std::fabs(out[i] - 3 * expect) < 1e-9
                                 ? " (reduced more than once)"
                                 : ""));
    }
    unsigned long long total = 0;
    std::string split;
    for (int r = 0; r < n; ++r) {
      total += claimed[r];
      split += (r ? ", " : "") + std::to_string(claimed[r]);
    }
    const unsigned long long bytes = c.count * sizeof(double);
    if (total != bytes)
      return fail(rank, what + ": the ranks claimed " + std::to_string(total) + " bytes (" + split +
                            "), the message has " + std::to_string(bytes) +
                            " (a piece taken twice or never, or zero copy did not run)");
    if (c.stalled && claimed[slow] * 4 > bytes)
      return fail(rank, what + ": the stopped rank " + std::to_string(slow) + " claimed " +
                            std::to_string(claimed[slow]) + " of " + std::to_string(bytes) + " bytes (" + split +
                            "): the others did not take its pieces");
    if (rank == slow && c.stalled && claimed[slow] != 0 && gStalls != stallsBefore + 1)
      return fail(rank, what + ": this rank claimed pieces but never stalled");
    if (rank == 0)
      std::printf("mp_zero_copy_claims: %d ranks, %s: claimed bytes per rank %s\n", n, what.c_str(), split.c_str());
  }
  MP_CHECK(rank, hocclCommDeregister(comm, inHandle));
  MP_CHECK(rank, hocclCommDeregister(comm, outHandle));
  MP_CHECK(rank, hocclMemFree(inMem));
  MP_CHECK(rank, hocclMemFree(outMem));
  MP_CHECK(rank, hocclCommDestroy(comm));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 2;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--ranks" && i + 1 < argc) n = std::atoi(argv[++i]);
  if (n < 2 || n > 8) {
    std::fprintf(stderr, "usage: mp_zero_copy_claims --ranks N (2..8)\n");
    return 2;
  }
  setenv("HOCCL_CMA_MIN_BYTES", "1", 1);  // every call single copy (the small exchanges too)
  setenv("HOCCL_ALGO", "single_copy", 1);
  unsetenv("HOCCL_SHM_DISABLE");
  const int rc = runRanks(n, rankBody, 100);
  std::printf("mp_zero_copy_claims: %d ranks: %s\n", n, rc == 0 ? "PASS" : "FAIL");
  return rc;
}
