// The physical reference for one-host collectives (issue 16), measured the way hoccl's perf tools measure hoccl,
// so that the two can be run alternately and compared:
//  - all-reduce of inputs and outputs that are already shared: N processes (as hoccl-run starts N ranks), each
//    holding its input and output in memfd blocks of its own (as hocclMemAlloc does), first touched by their owner;
//    each process maps every peer's blocks itself (as the peer-mapping cache does) and touches every page of them
//    before the clock starts. Rank r reduces block r of every input, in 128 KiB pieces (hoccl's piece) with hoccl's
//    CPU reduction loop, into its own output and copies each piece into every other output (hoccl's copy; from 4 MiB
//    of a share, reduced into an L2-resident buffer and streamed into every output, as hoccl does). The
//    ranks meet between iterations in a barrier in shared memory that waits as hoccl's waits do (base/wait.h: the
//    policy chosen from the same host load, one thread per rank). No arena, no registration, no mapping cost, no
//    hand-off of addresses: nothing a library could leave out.
//  - memcpy with every core: one process per core copying 16 MiB buffers at once (GB/s per core).
// Timing as nccl-tests' perf tools: -w warm-up iterations, then -n iterations timed as one batch (each rank's batch
// time / n, averaged over the ranks); a size is measured -r times and the median batch is printed (-r 1: one batch, like one
// perf-tool launch). Rows "size time_us busbw" (float sum, nccl-tests' all-reduce bus bandwidth
// 2(n-1)/n * size / time), then "memcpy_all <GB/s per core>" unless -m 0.
// Usage: bound [-p ranks] [-b min bytes] [-e max bytes] [-f factor] [-n iterations] [-w warm-up] [-r batches]
//              [-m 0|1]
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/wait.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/reduce.h"

namespace {

constexpr size_t kPiece = 128 << 10;                 // transports/shm/shm_zero_copy.cc: kZeroCopyPiece
constexpr size_t kStreamMinBytes = size_t{4} << 20;  // transports/shm/shm_zero_copy.cc: kStreamMinBytes
constexpr int kMaxRanks = 64, kMaxBatches = 64;

struct alignas(64) Control {
  std::atomic<uint64_t> arrived{0};
  std::atomic<int> failed{0};
  double seconds[kMaxBatches][kMaxRanks];  // [batch][rank]: the batch's time on that rank
};

// hoccl's waiting policy for `n` ranks on this host, from the same inputs the communicator samples.
hoccl::WaitPolicy policyFor(int n) {
  hoccl::HostLoad h;
  h.localRanks = n;
  cpu_set_t set;
  h.cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  h.hostCpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    char text[128] = {};
    if (std::fgets(text, sizeof(text), f)) h.runnable = hoccl::runnableFromLoadavg(text);
    std::fclose(f);
  }
  return hoccl::chooseWaitPolicy(h);
}

void barrier(Control* c, int n, uint64_t& round, hoccl::WaitPolicy policy) {
  ++round;
  c->arrived.fetch_add(1);
  hoccl::Backoff backoff(policy);
  while (c->arrived.load(std::memory_order_acquire) < round * static_cast<uint64_t>(n)) backoff.pause();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Rank r's view of every rank's buffers: its own and the peers' mappings.
struct View {
  std::vector<char*> in, out;
};

// One rank's share: block r of every input reduced, a piece at a time, and written into every output, as hoccl's
// zero-copy loop does it (transports/shm/shm_zero_copy.cc, zeroCopyReduce): from kStreamMinBytes of a share each
// piece is reduced into a private buffer that stays in L2 and streamed into every output (kernels::copyStreaming);
// below, it is reduced into the rank's own output and copied from there into the others.
void reduceShare(const View& v, size_t bytes, int r, int n) {
  const size_t count = bytes / 4;
  const size_t begin = count * r / n * 4, end = count * (r + 1) / n * 4;
  const bool stream = n > 1 && end - begin >= kStreamMinBytes;
  static std::vector<char> scratch(kPiece);
  for (size_t x = begin; x < end; x += kPiece) {
    const size_t m = std::min(kPiece, end - x);
    char* acc = stream ? scratch.data() : v.out[r] + x;
    const char* first = v.in[r] + x;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      hoccl::kernels::reduce(acc, first, v.in[q] + x, m / 4, hocclFloat, hoccl::kernels::BinOp::Sum);
      first = acc;
    }
    for (int q = 0; q < n; ++q) {
      if (stream) hoccl::kernels::copyStreaming(v.out[q] + x, acc, m);
      else if (q != r) hoccl::kernels::copy(v.out[q] + x, acc, m);
    }
  }
}

char* mapFd(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

struct Options {
  int n = 2, iters = 5, warmup = 2, batches = 1;
};

double allReduceBound(const Options& o, size_t bytes) {
  const int n = o.n;
  auto* ctl = static_cast<Control*>(
      mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (ctl == MAP_FAILED) {
    std::perror("bound: mmap");
    std::exit(1);
  }
  new (ctl) Control;
  // One memfd per buffer, made here so every rank can map every one (hoccl passes them over a socket).
  std::vector<int> inFd(n), outFd(n);
  for (int r = 0; r < n; ++r) {
    inFd[r] = memfd_create("bound-in", MFD_CLOEXEC);
    outFd[r] = memfd_create("bound-out", MFD_CLOEXEC);
    if (inFd[r] < 0 || outFd[r] < 0 || ftruncate(inFd[r], static_cast<off_t>(bytes)) != 0 ||
        ftruncate(outFd[r], static_cast<off_t>(bytes)) != 0) {
      std::perror("bound: memfd");
      std::exit(1);
    }
  }
  const hoccl::WaitPolicy policy = policyFor(n);
  std::vector<pid_t> kids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      View v;
      for (int q = 0; q < n; ++q) {
        v.in.push_back(mapFd(inFd[q], bytes));
        v.out.push_back(mapFd(outFd[q], bytes));
        if (!v.in.back() || !v.out.back()) {
          ctl->failed = 1;
          _exit(1);
        }
      }
      std::memset(v.in[r], 1, bytes);  // first touch by the owner, as the perf tool's buffer fill does
      std::memset(v.out[r], 0, bytes);
      uint64_t round = 0;
      barrier(ctl, n, round, policy);
      // Every page of the peers' blocks is touched before the clock starts (the warm-up does the rest).
      const long page = sysconf(_SC_PAGESIZE);
      volatile char sink = 0;
      for (int q = 0; q < n; ++q)
        if (q != r)
          for (size_t x = 0; x < bytes; x += static_cast<size_t>(page)) sink = sink + v.in[q][x] + v.out[q][x];
      barrier(ctl, n, round, policy);
      for (int i = 0; i < o.warmup; ++i) {
        reduceShare(v, bytes, r, n);
        barrier(ctl, n, round, policy);
      }
      for (int b = 0; b < o.batches; ++b) {
        barrier(ctl, n, round, policy);
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < o.iters; ++i) {
          reduceShare(v, bytes, r, n);
          barrier(ctl, n, round, policy);  // the call's end: every output is complete
        }
        ctl->seconds[b][r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.iters;
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  for (int r = 0; r < n; ++r) {
    close(inFd[r]);
    close(outFd[r]);
  }
  if (ctl->failed) {
    std::fprintf(stderr, "bound: a rank could not map the buffers of %zu bytes\n", bytes);
    std::exit(1);
  }
  std::vector<double> times;
  for (int b = 0; b < o.batches; ++b) {
    double sum = 0;  // the mean over the ranks, as the perf tools report by default (-a 1)
    for (int r = 0; r < n; ++r) sum += ctl->seconds[b][r];
    times.push_back(sum / n);
  }
  munmap(ctl, sizeof(Control));
  return median(times);
}

double memcpyAllCores() {
  const int cores = std::max(2, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  const size_t bytes = 16 << 20;
  auto* rates = static_cast<double*>(
      mmap(nullptr, sizeof(double) * cores, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<pid_t> kids;
  for (int c = 0; c < cores; ++c) {
    pid_t pid = fork();
    if (pid == 0) {
      std::vector<char> a(bytes, 1), b(bytes, 2);
      std::vector<double> g;
      for (int i = 0; i < 101; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        std::memcpy(b.data(), a.data(), bytes);
        g.push_back(bytes / 1e9 / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        std::swap(a, b);
      }
      rates[c] = median(g);
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  double sum = 0;
  for (int c = 0; c < cores; ++c) sum += rates[c];
  return sum / cores;
}

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  const std::string unit = end ? end : "";
  if (unit == "K") v *= 1 << 10;
  else if (unit == "M") v *= 1 << 20;
  else if (unit == "G") v *= 1 << 30;
  return static_cast<size_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int factor = 2, memcpyToo = 1;
  size_t minBytes = 16 << 20, maxBytes = 256 << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "-p") o.n = v;
    else if (a == "-b") minBytes = parseSize(argv[i + 1]);
    else if (a == "-e") maxBytes = parseSize(argv[i + 1]);
    else if (a == "-f") factor = v;
    else if (a == "-n") o.iters = v;
    else if (a == "-w") o.warmup = v;
    else if (a == "-r") o.batches = v;
    else if (a == "-m") memcpyToo = v;
    else {
      std::fprintf(stderr,
                   "usage: bound [-p ranks] [-b min] [-e max] [-f factor] [-n iterations] [-w warm-up] [-r batches] "
                   "[-m 0|1]\n");
      return 2;
    }
  }
  if (o.n < 1 || o.n > kMaxRanks || o.iters < 1 || o.warmup < 0 || o.batches < 1 || o.batches > kMaxBatches ||
      factor < 2 || minBytes < 4 || maxBytes < minBytes) {
    std::fprintf(stderr, "bound: bad arguments (ranks 1-%d, iterations >= 1, batches 1-%d, factor >= 2)\n", kMaxRanks,
                 kMaxBatches);
    return 2;
  }
  std::printf(
      "# all-reduce bound: %d ranks over inputs and outputs already shared (float sum), %s waits, "
      "%d warm-up, %d iterations per batch, median of %d batch(es)\n",
      o.n, hoccl::waitPolicyName(policyFor(o.n)), o.warmup, o.iters, o.batches);
  std::printf("# size time_us busbw\n");
  for (size_t b = minBytes; b <= maxBytes; b *= factor) {
    const double s = allReduceBound(o, b / 4 * 4);
    std::printf("%zu %.1f %.3f\n", b, s * 1e6, b / 1e9 / s * 2.0 * (o.n - 1) / o.n);
    std::fflush(stdout);
  }
  if (memcpyToo) std::printf("memcpy_all %.2f\n", memcpyAllCores());
  return 0;
}
