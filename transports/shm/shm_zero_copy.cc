// The zero-copy loops of the single-copy collectives over mapped registered buffers (see shm_zero_copy.h).
#include "transports/shm/shm_zero_copy.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/memory.h"

namespace hoccl::transport::shm {
namespace {

constexpr size_t kZeroCopyPiece = 128 << 10;  // bytes per piece: the reduced piece stays in L2 for its copies out

size_t blockBegin(size_t count, int q, int p) { return count * static_cast<size_t>(q) / static_cast<size_t>(p); }

}  // namespace

void zeroCopyReduce(const CollCall& call, int me, int p, const MappedBuffers& b, size_t srcOffset, size_t dstOffset,
                    size_t bytes, bool pushToAll) {
  const kernels::MemoryOps& mem = kernels::hostMemoryOps();
  const size_t elem = kernels::typeSize(call.dtype);
  const kernels::BinOp bin = kernels::binOpOf(call.op);
  char* out = b.recv[me] + dstOffset;
  const size_t piece = std::max(elem, kZeroCopyPiece / elem * elem);
  for (size_t x = 0; x < bytes; x += piece) {
    const size_t m = std::min(piece, bytes - x), n = m / elem;
    // Own input first: in place, out aliases it, so it must be read before out is written.
    const char* first = b.send[me] + srcOffset + x;
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      mem.reduce(out + x, first, b.send[q] + srcOffset + x, n, call.dtype, bin);
      first = out + x;
    }
    if (p == 1 && out + x != first) mem.copy(out + x, first, m);
    if (call.op == hocclAvg) mem.divide(out + x, n, call.dtype, p);
    if (pushToAll)
      for (int q = 0; q < p; ++q)
        if (q != me) mem.copy(b.recv[q] + dstOffset + x, out + x, m);
  }
}

void zeroCopyRun(const CollCall& call, int me, int p, const MappedBuffers& b) {
  const kernels::MemoryOps& mem = kernels::hostMemoryOps();
  const size_t elem = kernels::typeSize(call.dtype), bytes = call.count * elem;
  switch (call.coll) {
    case Coll::AllReduce: {
      const size_t off = blockBegin(call.count, me, p) * elem;
      zeroCopyReduce(call, me, p, b, off, off, blockBegin(call.count, me + 1, p) * elem - off, true);
      return;
    }
    case Coll::ReduceScatter: zeroCopyReduce(call, me, p, b, static_cast<size_t>(me) * bytes, 0, bytes, false); return;
    case Coll::AllGather:
      for (int q = 0; q < p; ++q) {
        char* dst = b.recv[me] + static_cast<size_t>(q) * bytes;
        if (dst != b.send[q]) mem.copy(dst, b.send[q], bytes);
      }
      return;
    case Coll::Broadcast:
      if (b.recv[me] != b.send[call.root]) mem.copy(b.recv[me], b.send[call.root], bytes);
      return;
    default: throwInternalError("zero copy given a collective it does not implement");
  }
}

}  // namespace hoccl::transport::shm
