/// @file reduce_scatter.cc
/// reduce_scatter_perf: rank r receives block r of the reduction of every rank's n x count elements.
/// count = size / n rounded down to 16 bytes; size column = n x count x type size; busbw = algbw x (n-1)/n.
/// In place: the receive buffer is block `rank` of the send buffer.
#include "perf.h"

namespace {

using namespace hoccl_perf;

Counts counts(size_t count, size_t elt, int n) {
  size_t base = perRankCount(count, elt, n);
  return {base * n, base, base, 0, base};
}
double busFactor(int n) { return static_cast<double>(n - 1) / n; }
double algBytes(size_t count, size_t elt, int n) { return static_cast<double>(count * elt) * n; }
void expected(std::vector<Block>& out, size_t count, int rank, int, int) {
  out.push_back({0, count, kReduceAll, rank * count});
}
hocclResult_t run(const CallArgs& a) {
  return hocclReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

const CollTest kTest{"reduce_scatter_perf", true, false, counts, busFactor, algBytes, expected, run};

}  // namespace

int main(int argc, char** argv) { return hoccl_perf::perfMain(argc, argv, kTest); }
