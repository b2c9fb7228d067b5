// tools/bench/overlap: communication hidden behind compute (issue 18, docs/overlap.md), measured on host memory.
//
//   overlap [--m ROWS] [--k INNER] [--n COLS] [--iters N]
//
// Run on every rank (hoccl-run -n 4 build/tools/bench/overlap, or tools/cluster/run -- build/tools/bench/overlap).
// Three experiments, each sequential against overlapped, float32, integer-valued data (every sum exact, so the
// results must be bit-identical):
//  1. all-gather then matrix product: every rank holds X_r (m x k), gathers X (nranks*m x k) and computes X * W
//     (W: k x n). Sequential: hocclAllGather, then the product block by block. Overlapped: hocclAllGatherOverlap,
//     the product of each block in onBlock, while the next block is in flight.
//  2. matrix product then reduce-scatter: every rank computes P_r = A_r * B (A_r: nranks*m x k) and the ranks
//     reduce-scatter P (rank r keeps rows block r, m x n). Sequential: the whole product, then hocclReduceScatter.
//     Overlapped: hocclReduceScatterOverlap, each block's product in produce.
//  3. PrimePar-style partitioned product: Y = sum_r X_r * W_r (X_r: m x k, W_r: k x n, a k-slice per rank). The
//     all-reduce version computes X_r * W_r and all-reduces it (every rank gets Y). The ring-shift version splits Y's
//     columns in nranks blocks of two halves; the partial sum of each block travels the ring (hocclRingShift by 1)
//     collecting X_r * W_r[:, block] on the way and ends summed on its owner (rank r: column block r). Blocking
//     shifts against hocclRingShiftStart/hocclWait with the other half computed meanwhile (double buffering).
// Times are the slowest rank's, median of --iters runs after one warm-up; speedup = sequential / overlapped.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hoccl/hoccl.h"

namespace {

using Clock = std::chrono::steady_clock;

int gRank = 0, gN = 1;
hocclComm_t gComm = nullptr;

void check(hocclResult_t rc, const char* what) {
  if (rc == hocclSuccess) return;
  std::fprintf(stderr, "overlap: rank %d: %s failed: %s: %s\n", gRank, what, hocclGetErrorString(rc),
               hocclGetLastError(nullptr));
  std::exit(1);
}

// C (rows x cols) += A (rows x inner, row stride lda) * B (inner x cols, row stride ldb); C row stride ldc.
void gemm(const float* a, size_t lda, const float* b, size_t ldb, float* c, size_t ldc, size_t rows, size_t inner,
          size_t cols) {
  for (size_t i = 0; i < rows; ++i) {
    float* ci = c + i * ldc;
    for (size_t p = 0; p < inner; ++p) {
      const float av = a[i * lda + p];
      const float* bp = b + p * ldb;
      for (size_t j = 0; j < cols; ++j) ci[j] += av * bp[j];
    }
  }
}

// Small integers in [-2, 2]: every product and sum of the benchmark stays exact in float32.
void fill(std::vector<float>& v, unsigned seed) {
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<int>((i * 2654435761u + seed * 97u) % 5) - 2);
}

double maxOverRanks(double seconds) {
  double out = 0;
  check(hocclAllReduce(&seconds, &out, 1, hocclDouble, hocclMax, gComm, nullptr), "all-reduce of times");
  return out;
}

template <class F>
double timed(F&& f, int iters) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    float x = 0, y = 0;
    check(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, gComm, nullptr), "barrier");
    auto start = Clock::now();
    f();
    t.push_back(maxOverRanks(std::chrono::duration<double>(Clock::now() - start).count()));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  int same = a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0, all = 0;
  check(hocclAllReduce(&same, &all, 1, hocclInt32, hocclMin, gComm, nullptr), "all-reduce of checks");
  return all == 1;
}

void report(const char* name, double seq, double ovl, bool same, const char* seqName, const char* ovlName) {
  if (gRank == 0)
    std::printf("%-34s %-22s %9.2f ms   %-26s %9.2f ms   speedup %5.2fx   results %s\n", name, seqName, seq * 1e3,
                ovlName, ovl * 1e3, seq / ovl, same ? "identical" : "DIFFER");
}

struct Dims {
  size_t m = 256, k = 512, n = 512;
};

bool allGatherThenGemm(const Dims& d, int iters) {
  std::vector<float> x(d.m * d.k), w(d.k * d.n), gathered(d.m * d.k * gN), ySeq(d.m * gN * d.n), yOvl(ySeq.size());
  fill(x, gRank + 1);
  fill(w, 7);
  auto seq = [&] {
    check(hocclAllGather(x.data(), gathered.data(), x.size(), hocclFloat, gComm, nullptr), "hocclAllGather");
    std::fill(ySeq.begin(), ySeq.end(), 0.f);
    for (int r = 0; r < gN; ++r)
      gemm(gathered.data() + r * d.m * d.k, d.k, w.data(), d.n, ySeq.data() + r * d.m * d.n, d.n, d.m, d.k, d.n);
  };
  struct Ctx {
    const Dims* d;
    const float* w;
    float* y;
  } ctx{&d, w.data(), yOvl.data()};
  auto onBlock = [](void* user, int src, const void* block, size_t) {
    auto* c = static_cast<Ctx*>(user);
    float* y = c->y + src * c->d->m * c->d->n;
    std::fill(y, y + c->d->m * c->d->n, 0.f);
    gemm(static_cast<const float*>(block), c->d->k, c->w, c->d->n, y, c->d->n, c->d->m, c->d->k, c->d->n);
    return 0;
  };
  auto ovl = [&] {
    check(hocclAllGatherOverlap(x.data(), gathered.data(), x.size(), hocclFloat, gComm, nullptr, onBlock, &ctx),
          "hocclAllGatherOverlap");
  };
  double ts = timed(seq, iters), to = timed(ovl, iters);
  bool same = identical(ySeq, yOvl);
  report("all-gather -> matmul", ts, to, same, "AllGather+matmul", "AllGatherOverlap");
  return same;
}

bool gemmThenReduceScatter(const Dims& d, int iters) {
  std::vector<float> a(d.m * gN * d.k), b(d.k * d.n), p(d.m * gN * d.n), work(p.size()), ySeq(d.m * d.n),
      yOvl(d.m * d.n);
  fill(a, gRank + 11);
  fill(b, 5);
  auto seq = [&] {
    std::fill(p.begin(), p.end(), 0.f);
    gemm(a.data(), d.k, b.data(), d.n, p.data(), d.n, d.m * gN, d.k, d.n);
    check(hocclReduceScatter(p.data(), ySeq.data(), d.m * d.n, hocclFloat, hocclSum, gComm, nullptr),
          "hocclReduceScatter");
  };
  struct Ctx {
    const Dims* d;
    const float *a, *b;
  } ctx{&d, a.data(), b.data()};
  auto produce = [](void* user, int dst, void* block, size_t) {
    auto* c = static_cast<Ctx*>(user);
    float* out = static_cast<float*>(block);
    std::fill(out, out + c->d->m * c->d->n, 0.f);
    gemm(c->a + dst * c->d->m * c->d->k, c->d->k, c->b, c->d->n, out, c->d->n, c->d->m, c->d->k, c->d->n);
    return 0;
  };
  auto ovl = [&] {
    check(hocclReduceScatterOverlap(work.data(), yOvl.data(), d.m * d.n, hocclFloat, hocclSum, gComm, nullptr, produce,
                                    &ctx),
          "hocclReduceScatterOverlap");
  };
  double ts = timed(seq, iters), to = timed(ovl, iters);
  bool same = identical(ySeq, yOvl);
  report("matmul -> reduce-scatter", ts, to, same, "matmul+ReduceScatter", "ReduceScatterOverlap");
  return same;
}

// Experiment 3. Column block c of Y has nranks*2 halves' worth of width: cols/nranks, split in two halves.
bool primePar(const Dims& d, int iters) {
  const size_t cb = d.n / gN, half = cb / 2;  // columns per block and per half (d.n divisible by 2*nranks)
  std::vector<float> x(d.m * d.k), w(d.k * d.n), partial(d.m * d.n), y(d.m * d.n);
  fill(x, gRank + 21);
  fill(w, gRank + 31);
  // All-reduce version: every rank gets Y; rank r's column block r is compared.
  auto allReduce = [&] {
    std::fill(partial.begin(), partial.end(), 0.f);
    gemm(x.data(), d.k, w.data(), d.n, partial.data(), d.n, d.m, d.k, d.n);
    check(hocclAllReduce(partial.data(), y.data(), partial.size(), hocclFloat, hocclSum, gComm, nullptr),
          "hocclAllReduce");
  };
  // Ring-shift version: acc[h] (m x half) is the travelling partial sum of half h of the block worked on.
  std::vector<float> acc[2] = {std::vector<float>(d.m * half), std::vector<float>(d.m * half)};
  std::vector<float> in[2] = {std::vector<float>(d.m * half), std::vector<float>(d.m * half)};
  auto addMine = [&](int h, int block) {  // acc[h] += X * W[:, block's half h]
    gemm(x.data(), d.k, w.data() + block * cb + h * half, d.n, acc[h].data(), half, d.m, d.k, half);
  };
  auto shifted = [&](bool overlapped) {
    for (auto& a : acc) std::fill(a.begin(), a.end(), 0.f);
    hocclRequest_t req = nullptr;
    int inFlight = -1;  // the half whose shift runs
    auto waitShift = [&] {
      if (inFlight < 0) return;
      check(hocclWait(req), "hocclWait");
      std::swap(acc[inFlight], in[inFlight]);
      inFlight = -1;
    };
    auto shift = [&](int h) {
      if (overlapped) {
        check(hocclRingShiftStart(acc[h].data(), in[h].data(), acc[h].size(), hocclFloat, 1, gComm, nullptr, &req),
              "hocclRingShiftStart");
        inFlight = h;
      } else {
        check(hocclRingShift(acc[h].data(), in[h].data(), acc[h].size(), hocclFloat, 1, gComm, nullptr),
              "hocclRingShift");
        std::swap(acc[h], in[h]);
      }
    };
    for (int s = 0; s < gN; ++s) {
      const int block = ((gRank - s - 1) % gN + gN) % gN;
      for (int h = 0; h < 2; ++h) {
        addMine(h, block);  // overlaps the shift of the other half
        waitShift();
        if (s + 1 < gN) shift(h);
      }
    }
    waitShift();
  };
  std::vector<float> mine(d.m * cb), fromAllReduce(d.m * cb);
  auto gatherMine = [&](std::vector<float>& out, bool fromY) {
    for (size_t i = 0; i < d.m; ++i)
      for (size_t j = 0; j < cb; ++j)
        out[i * cb + j] = fromY ? y[i * d.n + gRank * cb + j] : acc[j / half][i * half + j % half];
  };
  double tAr = timed(allReduce, iters);
  gatherMine(fromAllReduce, true);
  double tSeq = timed([&] { shifted(false); }, iters);
  gatherMine(mine, false);
  bool same = identical(mine, fromAllReduce);
  double tOvl = timed([&] { shifted(true); }, iters);
  gatherMine(mine, false);
  same &= identical(mine, fromAllReduce);
  report("PrimePar matmul (vs all-reduce)", tAr, tOvl, same, "matmul+AllReduce", "RingShiftStart/Wait");
  report("PrimePar matmul (shift overlap)", tSeq, tOvl, same, "RingShift (blocking)", "RingShiftStart/Wait");
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  Dims d;
  int iters = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto num = [&] { return i + 1 < argc ? std::strtoull(argv[++i], nullptr, 10) : 0ull; };
    if (a == "--m") d.m = num();
    else if (a == "--k") d.k = num();
    else if (a == "--n") d.n = num();
    else if (a == "--iters") iters = static_cast<int>(num());
    else {
      std::fprintf(stderr, "usage: overlap [--m ROWS] [--k INNER] [--n COLS] [--iters N]\n");
      return 2;
    }
  }
  check(hocclCommInitFromEnv(&gComm, &gRank, &gN), "hocclCommInitFromEnv");
  if (d.m == 0 || d.k == 0 || d.n == 0 || iters < 1 || d.n % (2 * gN) != 0) {
    if (gRank == 0)
      std::fprintf(stderr, "overlap: --m, --k, --n, --iters must be positive and --n a multiple of 2 x ranks\n");
    return 2;
  }
  if (gRank == 0)
    std::printf("overlap: %d ranks, blocks of %zu x %zu floats, W %zu x %zu, median of %d runs (slowest rank)\n", gN,
                d.m, d.k, d.k, d.n, iters);
  bool ok = allGatherThenGemm(d, iters);
  ok &= gemmThenReduceScatter(d, iters);
  ok &= primePar(d, iters);
  check(hocclCommDestroy(gComm), "hocclCommDestroy");
  return ok ? 0 : 1;
}
