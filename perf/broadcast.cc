/// @file broadcast.cc
/// broadcast_perf: the root's `count` elements land in every rank's receive buffer.
/// size = count x type size; busbw = algbw.
#include "perf.h"

namespace {

using namespace hoccl_perf;

Counts counts(size_t count, size_t, int) { return {count, count, count, 0, 0}; }
double busFactor(int) { return 1.0; }
double algBytes(size_t count, size_t elt, int) { return static_cast<double>(count * elt); }
void expected(std::vector<Block>& out, size_t count, int, int, int root) { out.push_back({0, count, root, 0}); }
hocclResult_t run(const CallArgs& a) {
  return hocclBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

const CollTest kTest{"broadcast_perf", false, true, counts, busFactor, algBytes, expected, run};

}  // namespace

int main(int argc, char** argv) { return hoccl_perf::perfMain(argc, argv, kTest); }
