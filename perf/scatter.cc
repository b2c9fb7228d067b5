/// @file scatter.cc
/// scatter_perf: block r of the root's send buffer lands in rank r's receive buffer.
/// count = size / n rounded down to 16 bytes; size column = n x count x type size; busbw = algbw x (n-1)/n.
/// In place: the receive buffer is block `rank` of the (root's) send buffer.
#include "perf.h"

namespace {

using namespace hoccl_perf;

Counts counts(size_t count, size_t elt, int n) {
  size_t base = perRankCount(count, elt, n);
  return {base * n, base, base, 0, base};
}
double busFactor(int n) { return static_cast<double>(n - 1) / n; }
double algBytes(size_t count, size_t elt, int n) { return static_cast<double>(count * elt) * n; }
void expected(std::vector<Block>& out, size_t count, int rank, int, int root) {
  out.push_back({0, count, root, rank * count});
}
hocclResult_t run(const CallArgs& a) { return hocclScatter(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream); }

const CollTest kTest{"scatter_perf", false, true, counts, busFactor, algBytes, expected, run};

}  // namespace

int main(int argc, char** argv) { return hoccl_perf::perfMain(argc, argv, kTest); }
