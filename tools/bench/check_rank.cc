// One launch of tools/bench/check-scale: NRANKS ranks as threads of this process on one new communicator, each makes
// WARMUP then CALLS all-reduces of COUNT floats (checked against the closed-form sum) and times each call. Prints one
// JSON line: the median over the ranks of each rank's median call time (us), and of its 25th percentile. The mismatch
// check's setting comes from the environment (HOCCL_CHECK_MISMATCH, HOCCL_CHECK_EXCHANGE), as do HOCCL_* others.
// Usage: check_rank NRANKS CALLS [WARMUP (default 20)] [COUNT (default 1)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "hoccl/hoccl.h"

namespace {

double percentile(std::vector<double> v, double f) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(f * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: check_rank NRANKS CALLS [WARMUP] [COUNT]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]), calls = std::atoi(argv[2]);
  const int warmup = argc > 3 ? std::atoi(argv[3]) : 20;
  const size_t count = argc > 4 ? static_cast<size_t>(std::atol(argv[4])) : 1;
  if (n < 1 || calls < 1 || warmup < 0) {
    std::fprintf(stderr, "check_rank: NRANKS and CALLS must be positive\n");
    return 2;
  }
  hocclUniqueId id;
  if (hocclGetUniqueId(&id) != hocclSuccess) {
    std::fprintf(stderr, "check_rank: hocclGetUniqueId: %s\n", hocclGetLastError(nullptr));
    return 1;
  }
  std::vector<double> p50(static_cast<size_t>(n)), p25(static_cast<size_t>(n));
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      hocclComm_t comm = nullptr;
      if (hocclCommInitRank(&comm, n, id, r) != hocclSuccess) {
        errors[static_cast<size_t>(r)] = std::string("init: ") + hocclGetLastError(nullptr);
        return;
      }
      std::vector<float> in(count), out(count);
      std::vector<double> times;
      for (int c = 0; c < warmup + calls; ++c) {
        std::fill(in.begin(), in.end(), static_cast<float>(r + c % 7));
        const auto t0 = std::chrono::steady_clock::now();
        if (hocclAllReduce(in.data(), out.data(), count, hocclFloat32, hocclSum, comm, nullptr) != hocclSuccess) {
          errors[static_cast<size_t>(r)] = std::string("all-reduce: ") + hocclGetLastError(nullptr);
          hocclCommAbort(comm);
          return;
        }
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        const float want = static_cast<float>(n * (n - 1) / 2 + n * (c % 7));
        for (float v : out)
          if (v != want) {
            errors[static_cast<size_t>(r)] = "all-reduce: wrong sum";
            hocclCommAbort(comm);
            return;
          }
        if (c >= warmup) times.push_back(us);
      }
      p50[static_cast<size_t>(r)] = percentile(times, 0.5);
      p25[static_cast<size_t>(r)] = percentile(times, 0.25);
      hocclCommFinalize(comm);
      hocclCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (!errors[static_cast<size_t>(r)].empty()) {
      std::fprintf(stderr, "check_rank: rank %d: %s\n", r, errors[static_cast<size_t>(r)].c_str());
      return 1;
    }
  std::printf("{\"n\": %d, \"calls\": %d, \"median_us\": %.2f, \"p25_us\": %.2f}\n", n, calls, percentile(p50, 0.5),
              percentile(p25, 0.5));
  return 0;
}
