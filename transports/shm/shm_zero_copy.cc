// The zero-copy loops of the single-copy collectives over mapped registered buffers (see shm_zero_copy.h).
#include "transports/shm/shm_zero_copy.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "kernels/memory.h"

namespace hoccl::transport::shm {
namespace {

constexpr size_t kZeroCopyPiece = 128 << 10;  // bytes per piece: the reduced piece stays in L2 for its copies out

// From this many bytes of a rank's share the copies into the outputs stream past the caches (kernels::copyStreaming):
// the outputs then take no read for ownership and push nothing useful out of the caches (measured from 4 MiB shares:
// docs/performance.md, "Zero copy: streamed stores and a pushed all-gather"). Smaller shares keep regular stores, as
// before: their outputs may still be in cache when the caller reads them (not measured).
constexpr size_t kStreamMinBytes = size_t{4} << 20;

size_t blockBegin(size_t count, int q, int p) { return count * static_cast<size_t>(q) / static_cast<size_t>(p); }

}  // namespace

void zeroCopyReduce(const CollCall& call, int me, int p, const MappedBuffers& b, size_t srcOffset, size_t dstOffset,
                    size_t bytes, bool pushToAll) {
  const kernels::MemoryOps& mem = kernels::hostMemoryOps();
  const size_t elem = kernels::typeSize(call.dtype);
  const kernels::BinOp bin = kernels::binOpOf(call.op);
  char* out = b.recv[me] + dstOffset;
  const size_t piece = std::max(elem, kZeroCopyPiece / elem * elem);
  // Streaming: each piece is reduced into a private buffer that stays in L2, then streamed into every output, this
  // rank's own included; otherwise it is reduced straight into this rank's output and copied from there.
  const bool stream = pushToAll && p > 1 && bytes >= kStreamMinBytes;
  thread_local std::vector<char> scratch;
  if (stream && scratch.size() < piece) scratch.resize(piece);
  for (size_t x = 0; x < bytes; x += piece) {
    const size_t m = std::min(piece, bytes - x), n = m / elem;
    char* acc = stream ? scratch.data() : out + x;
    // Own input first: in place, out aliases it, so it must be read before out is written.
    const char* first = b.send[me] + srcOffset + x;
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      mem.reduce(acc, first, b.send[q] + srcOffset + x, n, call.dtype, bin);
      first = acc;
    }
    if (p == 1 && acc != first) mem.copy(acc, first, m);
    if (call.op == hocclAvg) mem.divide(acc, n, call.dtype, p);
    if (stream) kernels::copyStreaming(out + x, acc, m);
    if (pushToAll)
      for (int q = 0; q < p; ++q) {
        if (q == me) continue;
        if (stream) kernels::copyStreaming(b.recv[q] + dstOffset + x, acc, m);
        else mem.copy(b.recv[q] + dstOffset + x, acc, m);
      }
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
    case Coll::AllGather: {
      // This rank's block into every output, a piece at a time: the piece is read from memory once and copied from
      // cache into the outputs, starting with this rank's own (in place it is already there) and going round the
      // peers from the next rank, so the ranks do not all write one output at once.
      const char* src = b.send[me];
      const size_t at = static_cast<size_t>(me) * bytes;
      const bool stream = bytes >= kStreamMinBytes;
      for (size_t x = 0; x < bytes; x += kZeroCopyPiece) {
        const size_t m = std::min(kZeroCopyPiece, bytes - x);
        for (int k = 0; k < p; ++k) {
          char* dst = b.recv[(me + k) % p] + at + x;
          if (dst == src + x) continue;
          if (stream) kernels::copyStreaming(dst, src + x, m);
          else mem.copy(dst, src + x, m);
        }
      }
      return;
    }
    case Coll::Broadcast:
      if (b.recv[me] != b.send[call.root]) mem.copy(b.recv[me], b.send[call.root], bytes);
      return;
    default: throwInternalError("zero copy given a collective it does not implement");
  }
}

}  // namespace hoccl::transport::shm
