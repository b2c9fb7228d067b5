/// @file all_reduce.cc
/// all_reduce_perf: every rank ends with the reduction of every rank's `count` elements.
/// size = count x type size; busbw = algbw x 2(n-1)/n (each byte crosses n-1 links twice in a ring).
#include "perf.h"

namespace {

using namespace hoccl_perf;

Counts counts(size_t count, size_t, int) { return {count, count, count, 0, 0}; }
double busFactor(int n) { return 2.0 * (n - 1) / n; }
double algBytes(size_t count, size_t elt, int) { return static_cast<double>(count * elt); }
void expected(std::vector<Block>& out, size_t count, int, int, int) { out.push_back({0, count, kReduceAll, 0}); }
hocclResult_t run(const CallArgs& a) { return hocclAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream); }

const CollTest kTest{"all_reduce_perf", true, false, counts, busFactor, algBytes, expected, run};

}  // namespace

int main(int argc, char** argv) { return hoccl_perf::perfMain(argc, argv, kTest); }
