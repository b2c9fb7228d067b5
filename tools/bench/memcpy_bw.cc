// The physical reference printed beside the benchmark: single-core memcpy bandwidth of a 256 MiB buffer
// (median of 9 copies, counting bytes copied once). Prints one number in GB/s.
// Usage: memcpy_bw [MiB] [copies]   (compare-mpi also runs one per core at once, with a smaller buffer, to measure
// what each core gets while the other copies too).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const size_t bytes = size_t{argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256} << 20;
  const int copies = argc > 2 ? std::atoi(argv[2]) : 9;
  if (bytes == 0 || copies < 1) {
    std::fprintf(stderr, "usage: memcpy_bw [MiB > 0] [copies > 0]\n");
    return 2;
  }
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> gbps;
  for (int i = 0; i < copies; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(bytes / 1e9 / s);
    std::swap(a, b);
  }
  std::nth_element(gbps.begin(), gbps.begin() + copies / 2, gbps.end());
  std::printf("%.2f\n", gbps[copies / 2]);
  return 0;
}
