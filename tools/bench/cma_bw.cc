// The physical reference for copies between processes: how fast process_vm_readv (what single-copy collectives,
// hoccl's and Open MPI's, use) moves a 64 MiB buffer from another process, next to memcpy in one process. Prints
// "<cma GB/s> <memcpy GB/s>", each the best of 5 copies, counting bytes copied once.
// `cma_bw OFFSET`: the destination starts OFFSET bytes further into its buffer than the source does into its own, so
// that the two lie at different offsets within a cache line (the kernel's copy slows down then; single copy in
// transports/shm avoids it, shm_single_copy.cc).
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

template <class Copy>
double bestRate(size_t bytes, Copy copy) {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    if (!copy()) return 0;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / 1e9 / s);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = size_t{64} << 20;
  const size_t offset = argc > 1 ? std::strtoul(argv[1], nullptr, 10) % 4096 : 0;
  std::vector<char> src(bytes, 1), dstBuffer(bytes + offset, 0);
  char* const dst = dstBuffer.data() + offset;
  int gate[2];
  if (pipe(gate) != 0) return 1;
  const pid_t child = fork();  // holds the same pages at the same addresses until told to go
  if (child == 0) {
    char c;
    ssize_t got = read(gate[0], &c, 1);
    _exit(got == 1 ? 0 : 1);
  }
  const double cma = bestRate(bytes, [&] {
    iovec local{dst, bytes}, remote{src.data(), bytes};
    return process_vm_readv(child, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(bytes);
  });
  const double copy = bestRate(bytes, [&] {
    std::memcpy(dst, src.data(), bytes);
    return true;
  });
  if (write(gate[1], "x", 1) != 1) return 1;
  waitpid(child, nullptr, 0);
  if (cma == 0) {
    std::perror("process_vm_readv");
    return 1;
  }
  std::printf("%.2f %.2f\n", cma, copy);
  return 0;
}
