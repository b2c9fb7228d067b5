// Host copy speed by the destination's offset within a cache line: glibc's memcpy against kernels::copy (the copy
// every data-path copy of hoccl goes through, kernels/cpu/copy.cc), one core, buffers in the caches.
// Usage: copy_skew [KiB] [copies]   (default 64 KiB, as many copies as move 2 GB)
// Prints one row per destination offset (0, 8, 16, 24, 32, 48 bytes past a page-aligned source): GB/s of memcpy and
// of kernels::copy, median of 5 timed runs each, the two alternated.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/copy.h"

namespace {

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

double gbps(size_t bytes, long copies, void (*fn)(void*, const void*, size_t), char* dst, const char* src) {
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < copies; ++i) {
    fn(dst, src, bytes);
    asm volatile("" : : "r"(dst) : "memory");  // keep every copy
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(bytes) * static_cast<double>(copies) / 1e9 / s;
}

void libcCopy(void* d, const void* s, size_t n) { std::memcpy(d, s, n); }

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = size_t{argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64} << 10;
  const long copies = argc > 2 ? std::atol(argv[2]) : static_cast<long>(2e9 / static_cast<double>(bytes ? bytes : 1));
  if (bytes == 0 || copies < 1) {
    std::fprintf(stderr, "usage: copy_skew [KiB > 0] [copies > 0]\n");
    return 2;
  }
  const size_t room = (bytes + 2 * 4096) / 4096 * 4096;
  std::unique_ptr<char, FreeDeleter> src(static_cast<char*>(std::aligned_alloc(4096, room)));
  std::unique_ptr<char, FreeDeleter> dst(static_cast<char*>(std::aligned_alloc(4096, room)));
  if (!src || !dst) return 1;
  std::memset(src.get(), 1, room);
  std::memset(dst.get(), 2, room);
  std::printf("# copy_skew: %zu bytes, %ld copies per run; GB/s, median of 5\n", bytes, copies);
  std::printf("# dst offset  memcpy  kernels::copy\n");
  for (size_t off : {0, 8, 16, 24, 32, 48}) {
    std::vector<double> libc, ours;
    for (int r = 0; r < 5; ++r) {
      libc.push_back(gbps(bytes, copies, libcCopy, dst.get() + off, src.get()));
      ours.push_back(gbps(bytes, copies, hoccl::kernels::copy, dst.get() + off, src.get()));
    }
    std::nth_element(libc.begin(), libc.begin() + 2, libc.end());
    std::nth_element(ours.begin(), ours.begin() + 2, ours.end());
    std::printf("%12zu  %6.2f  %13.2f\n", off, libc[2], ours[2]);
  }
  return 0;
}
