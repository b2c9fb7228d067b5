// The Open MPI baseline for tools/bench/compare-mpi: MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block and
// MPI_Bcast timed exactly as hoccl's perf tools time their collectives (same sizes, warm-up and timed iterations,
// average over ranks, nccl-tests' algbw/busbw formulas), printing rows in the perf tools' column layout:
//   size  count  type  redop  root  time(us)  algbw  busbw  #wrong
// Usage: mpirun -np N mpi_coll_bench allreduce|allgather|reducescatter|bcast -b MIN -e MAX -f FACTOR -n ITERS -w WARM
// The buffers are page-aligned, as the perf tools' are (perf/rank.cc): a buffer from malloc starts 16 bytes into its
// page, where glibc's memcpy crawls on some CPUs (kernels/cpu/copy.cc), and both sides must be measured alike.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K':
    case 'k': v *= 1024; break;
    case 'M':
    case 'm': v *= 1024 * 1024; break;
    case 'G':
    case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;

// count floats (at least one), page-aligned, every element `value`.
Buffer pageAligned(size_t count, float value) {
  count = std::max<size_t>(count, 1);
  const size_t bytes = (count * sizeof(float) + 4095) / 4096 * 4096;
  Buffer b(static_cast<float*>(std::aligned_alloc(4096, bytes)));
  if (!b) {
    std::fprintf(stderr, "mpi_coll_bench: cannot allocate %zu bytes\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::fill(b.get(), b.get() + count, value);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 2) {
    if (rank == 0)
      std::fprintf(stderr, "usage: mpi_coll_bench allreduce|allgather|reducescatter|bcast [-b -e -f -n -w]\n");
    MPI_Finalize();
    return 2;
  }
  std::string coll = argv[1];
  size_t minBytes = 8, maxBytes = 64 << 20;
  int factor = 2, iters = 20, warmup = 5;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string f = argv[i];
    if (f == "-b") minBytes = parseSize(argv[i + 1]);
    else if (f == "-e") maxBytes = parseSize(argv[i + 1]);
    else if (f == "-f") factor = std::atoi(argv[i + 1]);
    else if (f == "-n") iters = std::atoi(argv[i + 1]);
    else if (f == "-w") warmup = std::atoi(argv[i + 1]);
  }
  const bool nway = coll == "allgather" || coll == "reducescatter";
  if (rank == 0) std::printf("# mpi_coll_bench %s, %d ranks\n", coll.c_str(), n);
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
    // As the perf tools: `bytes` is the larger buffer; n-way per-rank counts rounded down to 16-byte multiples.
    size_t count = bytes / sizeof(float);
    if (nway) count = (bytes / n / 16 * 16) / sizeof(float);
    size_t sendCount = coll == "reducescatter" ? count * n : count;
    size_t recvCount = coll == "allgather" ? count * n : count;
    Buffer send = pageAligned(sendCount, 1.0f), recv = pageAligned(recvCount, 0.0f);
    auto run = [&] {
      if (coll == "allreduce") MPI_Allreduce(send.get(), recv.get(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else if (coll == "allgather")
        MPI_Allgather(send.get(), count, MPI_FLOAT, recv.get(), count, MPI_FLOAT, MPI_COMM_WORLD);
      else if (coll == "reducescatter")
        MPI_Reduce_scatter_block(send.get(), recv.get(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else MPI_Bcast(send.get(), count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    };
    for (int i = 0; i < warmup; ++i) run();
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) run();
    double local = (MPI_Wtime() - t0) / iters, sum = 0;
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double secs = sum / n;
    double sizeBytes = static_cast<double>(nway ? count * n : count) * sizeof(float);
    double algbw = sizeBytes / 1e9 / secs;
    double factorBw = coll == "allreduce" ? 2.0 * (n - 1) / n : (nway ? double(n - 1) / n : 1.0);
    if (rank == 0)
      std::printf("%12zu  %12zu  %8s  %6s  %6d  %9.2f  %7.2f  %7.2f  %6d\n", static_cast<size_t>(sizeBytes), count,
                  "float", coll == "allreduce" || coll == "reducescatter" ? "sum" : "none", coll == "bcast" ? 0 : -1,
                  secs * 1e6, algbw, algbw * factorBw, 0);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
