/// @file all_gather.cc
/// all_gather_perf: rank r's `count` elements land at block r of every rank's receive buffer.
/// count = size / n rounded down to 16 bytes; size column = n x count x type size; busbw = algbw x (n-1)/n.
/// In place: the send buffer is block `rank` of the receive buffer.
#include "perf.h"

namespace {

using namespace hoccl_perf;

Counts counts(size_t count, size_t elt, int n) {
  size_t base = perRankCount(count, elt, n);
  return {base, base * n, base, base, 0};
}
double busFactor(int n) { return static_cast<double>(n - 1) / n; }
double algBytes(size_t count, size_t elt, int n) { return static_cast<double>(count * elt) * n; }
void expected(std::vector<Block>& out, size_t count, int, int n, int) {
  for (int r = 0; r < n; ++r) out.push_back({r * count, count, r, 0});
}
hocclResult_t run(const CallArgs& a) { return hocclAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream); }

const CollTest kTest{"all_gather_perf", false, false, counts, busFactor, algBytes, expected, run};

}  // namespace

int main(int argc, char** argv) { return hoccl_perf::perfMain(argc, argv, kTest); }
