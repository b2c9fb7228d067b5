// The physical reference for one-host collectives (issue 16), measured in the same run as what it bounds:
//  - all-reduce of inputs and outputs that are already shared: N forked processes over one shared mapping holding
//    every rank's input and output; rank r reduces block r of every input (in cache-sized pieces, with hoccl's CPU
//    reduction loop) and writes the result into every output; a spin barrier in the same mapping separates the
//    iterations. No arena, no registration, no mapping cost: nothing a library could leave out.
//  - memcpy with every core: one process per core copying 16 MiB buffers at once (GB/s per core).
// Prints nccl-tests style rows "size time_us busbw" (median of the iterations, float sum, nccl-tests' all-reduce
// bus bandwidth 2(n-1)/n * size / time), then "memcpy_all <GB/s per core>".
// Usage: bound [-n ranks] [-b min bytes] [-e max bytes] [-f factor] [-i iterations]
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
#include <vector>

#include "kernels/cpu/reduce.h"

namespace {

constexpr size_t kPiece = 128 << 10;

struct alignas(64) Control {
  std::atomic<uint64_t> arrived{0};
  double seconds[64][64];  // [iteration][rank] (iterations beyond 64 are not recorded)
};

void barrier(Control* c, int n, uint64_t& round) {
  ++round;
  c->arrived.fetch_add(1);
  while (c->arrived.load(std::memory_order_acquire) < round * static_cast<uint64_t>(n)) {
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One rank's share: block r of every input reduced into its output, then copied into every other output.
void reduceShare(char* base, size_t bytes, int r, int n) {
  const size_t count = bytes / 4;
  const size_t begin = count * r / n * 4, end = count * (r + 1) / n * 4;
  auto in = [&](int q) { return base + static_cast<size_t>(q) * bytes; };
  auto out = [&](int q) { return base + static_cast<size_t>(n + q) * bytes; };
  for (size_t x = begin; x < end; x += kPiece) {
    const size_t m = std::min(kPiece, end - x);
    const char* first = in(r) + x;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      hoccl::kernels::reduce(out(r) + x, first, in(q) + x, m / 4, hocclFloat, hoccl::kernels::BinOp::Sum);
      first = out(r) + x;
    }
    for (int q = 0; q < n; ++q)
      if (q != r) std::memcpy(out(q) + x, out(r) + x, m);
  }
}

double allReduceBound(int n, size_t bytes, int iters) {
  const size_t total = 2 * static_cast<size_t>(n) * bytes;
  auto* ctl = static_cast<Control*>(
      mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  char* base = static_cast<char*>(mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (ctl == MAP_FAILED || base == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  new (ctl) Control;
  std::vector<pid_t> kids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      std::memset(base + static_cast<size_t>(r) * bytes, 1, bytes);  // first touch by the owner, as MemAlloc does
      std::memset(base + static_cast<size_t>(n + r) * bytes, 0, bytes);
      uint64_t round = 0;
      barrier(ctl, n, round);
      for (int i = 0; i < iters + 2; ++i) {  // two warm-up iterations
        barrier(ctl, n, round);
        auto t0 = std::chrono::steady_clock::now();
        reduceShare(base, bytes, r, n);
        barrier(ctl, n, round);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 2 && i - 2 < 64) ctl->seconds[i - 2][r] = s;
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  std::vector<double> times;
  for (int i = 0; i < std::min(iters, 64); ++i) {
    double worst = 0;
    for (int r = 0; r < n; ++r) worst = std::max(worst, ctl->seconds[i][r]);
    times.push_back(worst);
  }
  munmap(base, total);
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
  int n = 2, iters = 10, factor = 2;
  size_t minBytes = 16 << 20, maxBytes = 256 << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "-n") n = std::atoi(argv[i + 1]);
    else if (a == "-b") minBytes = parseSize(argv[i + 1]);
    else if (a == "-e") maxBytes = parseSize(argv[i + 1]);
    else if (a == "-f") factor = std::atoi(argv[i + 1]);
    else if (a == "-i") iters = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bound [-n ranks] [-b min] [-e max] [-f factor] [-i iterations]\n");
      return 2;
    }
  }
  if (n < 1 || n > 64 || iters < 1 || factor < 2 || minBytes < 4 || maxBytes < minBytes) {
    std::fprintf(stderr, "bound: bad arguments\n");
    return 2;
  }
  std::printf("# all-reduce bound: %d ranks over inputs and outputs already shared (float sum)\n", n);
  std::printf("# size time_us busbw\n");
  for (size_t b = minBytes; b <= maxBytes; b *= factor) {
    const double s = allReduceBound(n, b / 4 * 4, iters);
    std::printf("%zu %.1f %.3f\n", b, s * 1e6, b / 1e9 / s * 2.0 * (n - 1) / n);
    std::fflush(stdout);
  }
  std::printf("memcpy_all %.2f\n", memcpyAllCores());
  return 0;
}
