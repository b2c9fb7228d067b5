/// @file sendrecv.cc
/// sendrecv_perf: inside one group every rank sends its `count` elements to rank+1 and receives rank-1's.
/// size = count x type size; busbw = algbw.
#include "perf.h"

namespace {

using namespace hoccl_perf;

Counts counts(size_t count, size_t, int) { return {count, count, count, 0, 0}; }
double busFactor(int) { return 1.0; }
double algBytes(size_t count, size_t elt, int) { return static_cast<double>(count * elt); }
void expected(std::vector<Block>& out, size_t count, int rank, int n, int) {
  out.push_back({0, count, (rank - 1 + n) % n, 0});
}
hocclResult_t run(const CallArgs& a) {
  int next = (a.rank + 1) % a.nranks, prev = (a.rank - 1 + a.nranks) % a.nranks;
  hocclResult_t r = hocclGroupStart();
  if (r != hocclSuccess) return r;
  hocclResult_t s = hocclSend(a.send, a.count, a.type, next, a.comm, a.stream);
  hocclResult_t v = hocclRecv(a.recv, a.count, a.type, prev, a.comm, a.stream);
  r = hocclGroupEnd();  // always close the group, even after an error
  if (s != hocclSuccess) return s;
  if (v != hocclSuccess) return v;
  return r;
}

const CollTest kTest{"sendrecv_perf", false, false, counts, busFactor, algBytes, expected, run};

}  // namespace

int main(int argc, char** argv) { return hoccl_perf::perfMain(argc, argv, kTest); }
