/// @file alltoall.cc
/// alltoall_perf: block j of rank i's send buffer lands at block i of rank j's receive buffer.
/// count (per peer) = size / n rounded down to 16 bytes; size column = n x count x type size;
/// busbw = algbw x (n-1)/n.
#include "perf.h"

namespace {

using namespace hoccl_perf;

Counts counts(size_t count, size_t elt, int n) {
  size_t base = perRankCount(count, elt, n);
  return {base * n, base * n, base, 0, 0};
}
double busFactor(int n) { return static_cast<double>(n - 1) / n; }
double algBytes(size_t count, size_t elt, int n) { return static_cast<double>(count * elt) * n; }
void expected(std::vector<Block>& out, size_t count, int rank, int n, int) {
  for (int r = 0; r < n; ++r) out.push_back({r * count, count, r, rank * count});
}
hocclResult_t run(const CallArgs& a) { return hocclAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream); }

const CollTest kTest{"alltoall_perf", false, false, counts, busFactor, algBytes, expected, run};

}  // namespace

int main(int argc, char** argv) { return hoccl_perf::perfMain(argc, argv, kTest); }
