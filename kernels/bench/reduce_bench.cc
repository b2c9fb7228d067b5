// reduce_bench: bandwidth of hoccl::kernels::reduce against memcpy on large host buffers.
//
//   reduce_bench [MiB=64] [iterations=20]
//
// Bandwidth counts the bytes the kernel must move: memcpy/copy 2*S (read + write), reduce 3*S (two reads, one
// write), where S is the buffer size. Each figure is the best of the iterations (the least disturbed by other
// processes on a shared machine). Not run by the tests.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/reduce_isa.h"

namespace {

using Clock = std::chrono::steady_clock;

double bestSeconds(int iterations, const std::function<void()>& body) {
  double best = 1e30;
  for (int it = 0; it < iterations; ++it) {
    const auto t0 = Clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

void report(const char* what, double bytesMoved, double seconds) {
  std::printf("%-34s %8.2f GB/s  (%.3f ms)\n", what, bytesMoved / seconds / 1e9, seconds * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hoccl::kernels;
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  const size_t bytes = mib << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2), c(bytes, 0);
  for (size_t i = 0; i < bytes / sizeof(float); ++i) {
    reinterpret_cast<float*>(a.data())[i] = float(i % 1000);
    reinterpret_cast<float*>(b.data())[i] = 0.5f;
  }
  std::printf("# reduce_bench: %zu MiB buffers, best of %d, loops: %s\n", mib, iterations, isaName());
  const double s = static_cast<double>(bytes);
  report("memcpy", 2 * s, bestSeconds(iterations, [&] { std::memcpy(c.data(), a.data(), bytes); }));
  report("kernels::copy", 2 * s, bestSeconds(iterations, [&] { copy(c.data(), a.data(), bytes); }));

  struct Case {
    const char* name;
    hocclDataType_t dt;
  };
  const Case cases[] = {{"float", hocclFloat32}, {"double", hocclFloat64},    {"int32", hocclInt32},
                        {"half", hocclFloat16},  {"bfloat16", hocclBfloat16}, {"f8e4m3", hocclFloat8e4m3}};
  char label[64];
  for (const Case& cs : cases) {
    const size_t n = bytes / typeSize(cs.dt);
    std::snprintf(label, sizeof label, "reduce %s sum c=a+b", cs.name);
    report(label, 3 * s, bestSeconds(iterations, [&] { reduce(c.data(), a.data(), b.data(), n, cs.dt, BinOp::Sum); }));
    std::snprintf(label, sizeof label, "reduce %s sum a+=b", cs.name);
    report(label, 3 * s, bestSeconds(iterations, [&] { reduce(a.data(), a.data(), b.data(), n, cs.dt, BinOp::Sum); }));
  }
  const size_t nf = bytes / sizeof(float);
  report("baseline float sum c=a+b", 3 * s, bestSeconds(iterations, [&] {
           baseline::reduce(c.data(), a.data(), b.data(), nf, hocclFloat32, BinOp::Sum);
         }));
  report("baseline half sum c=a+b", 3 * s, bestSeconds(iterations, [&] {
           baseline::reduce(c.data(), a.data(), b.data(), bytes / 2, hocclFloat16, BinOp::Sum);
         }));
  return 0;
}
